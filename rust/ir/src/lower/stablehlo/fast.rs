//! The fast path of the commonest equations: plain element-wise ops (`sin`, `add`, `mul`
//! ...) whose operands need no broadcast but of scalar literals. They are written
//! straight into the module's buffer, each result bound as a plain `%n` of its
//! variable's type (no string made per value), each type formatted once per aval. The
//! text is exactly what the general path ([`Module::lower_eqn`]) writes.

use super::ops::{binary_op_name, scalar_text, unary_op_name};
use super::text::{element_type, tensor_of};
use super::{FuncState, Module, Value};
use crate::dtype::DType;
use crate::jaxpr::{Atom, Eqn, VarId};
use crate::primitive::Builtin;

#[cfg(test)]
thread_local! {
    /// Set by the tests comparing the fast path with the general one.
    static DISABLED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the fast path is off (in the tests comparing it with the general path).
pub(super) fn disabled() -> bool {
    #[cfg(test)]
    {
        DISABLED.with(|d| d.get())
    }
    #[cfg(not(test))]
    {
        false
    }
}

/// `%n`.
fn push_number(out: &mut String, n: u32) {
    out.push('%');
    let mut buf = [0u8; 10];
    let mut i = buf.len();
    let mut n = n;
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // The digits are ASCII.
    out.push_str(std::str::from_utf8(&buf[i..]).unwrap_or("0"));
}

/// An operand of the op as written: a bound value (its name and type), or a
/// literal's value number after its constant (and broadcast) are written.
enum Operand {
    Var(VarId),
    Number(u32, Ty),
}

/// The type of a value the fast path made.
enum Ty {
    /// `tensor<f32>`: a scalar of this (non-key) dtype.
    Scalar(DType),
    /// The type of this variable (the equation's result).
    OfVar(VarId),
    /// Any other.
    Owned(Box<str>),
}

/// Writes a type.
fn push_ty(out: &mut String, f: &mut FuncState<'_>, ty: &Ty) {
    match ty {
        Ty::Scalar(d) => {
            out.push_str("tensor<");
            out.push_str(element_type(*d));
            out.push('>');
        }
        Ty::OfVar(v) => out.push_str(f.var_type(*v)),
        Ty::Owned(s) => out.push_str(s),
    }
}

impl Module {
    /// Lowers `e` by the fast path if it is a plain element-wise equation (see the module
    /// docs); false (writing nothing) otherwise.
    pub(crate) fn lower_plain_elementwise(
        &mut self,
        f: &mut FuncState<'_>,
        b: Builtin,
        e: &Eqn,
    ) -> bool {
        if !self.fast {
            return false;
        }
        let (name, binary) = match (unary_op_name(b), binary_op_name(b)) {
            (Some(n), _) if b.family().is_unary() => (n, false),
            (_, Some(n)) if b.family().is_binary() => (n, true),
            _ => return false,
        };
        let [out] = e.outvars() else {
            return false;
        };
        let inputs = e.inputs();
        if inputs.len() != if binary { 2 } else { 1 } {
            return false;
        }
        let j = f.jaxpr;
        let out_aval = j.var_aval(*out);
        // Every operand: a bound variable of the result's shape (a unary op's operand
        // needs no broadcast whatever its shape), or a scalar literal of a plain dtype.
        for &a in inputs {
            match a {
                Atom::Var(v) => {
                    if matches!(f.value(v), Value::Unbound)
                        || (binary && j.var_aval(v).shape != out_aval.shape)
                    {
                        return false;
                    }
                }
                Atom::Lit(l) => {
                    if j.get_literal(l).is_none_or(|lit| lit.dtype.is_key()) {
                        return false;
                    }
                }
            }
        }
        // As the general path: the literals' constants first, in operand order, then the
        // broadcasts of the operands that need one, then the op.
        let mut ops: [Option<Operand>; 2] = [None, None];
        for (k, &a) in inputs.iter().enumerate() {
            ops[k] = Some(match a {
                Atom::Var(v) => Operand::Var(v),
                Atom::Lit(l) => {
                    let lit = *j.literal(l);
                    let ty = Ty::Scalar(lit.dtype);
                    let n = f.fresh_number();
                    let mut out = std::mem::take(&mut self.out);
                    out.push_str("    ");
                    push_number(&mut out, n);
                    out.push_str(" = \"stablehlo.constant\"() {value = dense<");
                    out.push_str(&scalar_text(lit.value, lit.dtype));
                    out.push_str("> : ");
                    push_ty(&mut out, f, &ty);
                    out.push_str("} : () -> ");
                    push_ty(&mut out, f, &ty);
                    out.push('\n');
                    self.out = out;
                    Operand::Number(n, ty)
                }
            });
        }
        if binary && out_aval.shape.rank() > 0 {
            for (k, &a) in inputs.iter().enumerate() {
                let Atom::Lit(l) = a else { continue };
                let Some(Operand::Number(c, scalar_ty)) = ops[k].take() else {
                    return false;
                };
                let d = j.literal(l).dtype;
                let ty = if d == out_aval.dtype {
                    Ty::OfVar(*out)
                } else {
                    Ty::Owned(tensor_of(out_aval.shape.dims(), d).into_boxed_str())
                };
                let n = f.fresh_number();
                let mut out = std::mem::take(&mut self.out);
                out.push_str("    ");
                push_number(&mut out, n);
                out.push_str(" = \"stablehlo.broadcast_in_dim\"(");
                push_number(&mut out, c);
                out.push_str(") {broadcast_dimensions = array<i64>} : (");
                push_ty(&mut out, f, &scalar_ty);
                out.push_str(") -> ");
                push_ty(&mut out, f, &ty);
                out.push('\n');
                self.out = out;
                ops[k] = Some(Operand::Number(n, ty));
            }
        }
        let n = f.fresh_number();
        let mut line = std::mem::take(&mut self.out);
        line.push_str("    ");
        push_number(&mut line, n);
        line.push_str(" = \"");
        line.push_str(name);
        line.push_str("\"(");
        for (k, op) in ops.iter().flatten().enumerate() {
            if k > 0 {
                line.push_str(", ");
            }
            match op {
                Operand::Var(v) => match f.value(*v) {
                    Value::Ssa(s) => line.push_str(&s.name),
                    Value::Plain(m) => push_number(&mut line, *m),
                    Value::Unbound => {}
                },
                Operand::Number(m, _) => push_number(&mut line, *m),
            }
        }
        line.push_str(") : (");
        for (k, op) in ops.iter().flatten().enumerate() {
            if k > 0 {
                line.push_str(", ");
            }
            match op {
                Operand::Var(v) => match f.value(*v) {
                    Value::Ssa(s) => line.push_str(&s.ty),
                    _ => line.push_str(f.var_type(*v)),
                },
                Operand::Number(_, ty) => push_ty(&mut line, f, ty),
            }
        }
        line.push_str(") -> ");
        line.push_str(f.var_type(*out));
        line.push('\n');
        self.out = line;
        f.bind_plain(*out, n);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::DISABLED;
    use crate::lower::stablehlo::lower_jaxpr;
    use crate::text::parse_jaxpr;

    fn both(text: &str) -> (String, String) {
        let j = parse_jaxpr(text).expect("reads");
        let fast = lower_jaxpr(&j, "m").expect("lowers");
        DISABLED.with(|d| d.set(true));
        let slow = lower_jaxpr(&j, "m");
        DISABLED.with(|d| d.set(false));
        (fast, slow.expect("lowers"))
    }

    #[test]
    fn fast_path_writes_what_the_general_path_writes() {
        let unary = [
            "neg", "abs", "exp", "log", "log1p", "expm1", "sin", "cos", "tan", "tanh", "logistic",
            "sqrt", "rsqrt", "floor", "ceil",
        ];
        let binary = ["add", "sub", "mul", "div", "rem", "max", "min"];
        let mut eqns = Vec::new();
        let mut n = 0;
        let mut last = "a".to_owned();
        for op in unary {
            let v = format!("v{n}");
            n += 1;
            eqns.push(format!("{v}:f32[2,3] = {op} {last}"));
            last = v;
        }
        for op in binary {
            for rhs in [last.clone(), "1.5:f32[]".to_owned(), "b".to_owned()] {
                let v = format!("v{n}");
                n += 1;
                eqns.push(format!("{v}:f32[2,3] = {op} {last} {rhs}"));
                let w = format!("v{n}");
                n += 1;
                eqns.push(format!("{w}:f32[2,3] = {op} 2.0:f32[] {v}"));
                last = w;
            }
        }
        // A value bound by the general path (pow), then used by the fast path; scalars;
        // a broadcast the fast path leaves to the general path; integers and bools.
        let rest = [
            format!("p:f32[2,3] = pow {last} b"),
            "q:f32[2,3] = sin p".to_owned(),
            "r:f32[] = add c 1.0:f32[]".to_owned(),
            "s:f32[] = mul 3.0:f32[] 4.0:f32[]".to_owned(),
            "t:f32[] = neg 3.0:f32[]".to_owned(),
            "u:f32[2,3] = add q c".to_owned(),
            "w:i32[3] = and d 7:i32[]".to_owned(),
            "x:i32[3] = or w d".to_owned(),
            "y:i32[3] = xor x -1:i32[]".to_owned(),
            "z:i32[3] = not y".to_owned(),
            "zz:bool[3] = not e".to_owned(),
        ];
        eqns.extend(rest);
        let text = format!(
            "{{ lambda ; a:f32[2,3] b:f32[2,3] c:f32[] d:i32[3] e:bool[3]. let {} in (q, r, s, t, u, z, zz) }}",
            eqns.join("; ")
        );
        let (fast, slow) = both(&text);
        assert_eq!(fast, slow);
        let (fast, slow) = both(&crate::text::print_jaxpr(
            &crate::generate::chain(10, 4).expect("a chain"),
        ));
        assert_eq!(fast, slow);
    }
}
