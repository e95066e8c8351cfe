//! `JaxprBuilder`: builds a jaxpr equation by equation (what tracing does).
//!
//! Every variable a builder makes carries the builder's unique id, so a variable of
//! another builder or of a built jaxpr is caught before it reaches the IR. The IR builder
//! sits in a mutex; calls take it with `try_lock`, so a re-entrant call (from an extension
//! primitive's `abstract_eval`) or a call from another thread while one is running raises
//! `BuilderError` instead of deadlocking.

use crate::avals::{describe, dtype_from_py, numpy_array_aval, ShapedArray};
use crate::errors::{self, Error, Result};
use crate::jaxpr::{Jaxpr, Literal, Origin, Var};
use crate::params::{params_from_py, PyParams};
use crate::primitives::ExtensionPrimitive;
use ferrax_ir::fxhash::FxBuild;
use ferrax_ir::jaxpr::{Atom, VarId};
use ferrax_ir::params::Params;
use ferrax_ir::primitive::{Builtin, Primitive};
use ferrax_ir::{AbstractValue, DType, JaxprBuilder as IrBuilder, LitValue, Literal as IrLiteral};
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple, PyType};
use std::collections::HashMap;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

static NEXT_BUILDER_ID: AtomicU64 = AtomicU64::new(1);

/// An equation input read from Python, before its literal is added to the builder.
#[derive(Clone)]
enum Input {
    Var(VarId),
    Lit(IrLiteral),
}

/// Builds a jaxpr: declare constvars and invars, add equations (their output types come
/// from the primitive's shape rule), then `build(outvars)`, which typechecks the jaxpr.
/// A builder builds once.
#[pyclass(frozen, module = "ferrax._ir", name = "JaxprBuilder")]
pub struct JaxprBuilder {
    id: u64,
    inner: Mutex<Option<IrBuilder>>,
    /// One `ShapedArray` object per type, for `add_eqn_typed` (and the avals given to
    /// `add_invar`/`add_constvar`): tracing compares types with `is`, and gets them
    /// without a conversion per equation.
    avals: Mutex<AvalCache>,
}

// The cache hashes small keys often: SipHash would cost more than the rest of a hit.
type AvalCache = HashMap<AbstractValue, Py<ShapedArray>, FxBuild>;

impl JaxprBuilder {
    fn lock(&self) -> Result<MutexGuard<'_, Option<IrBuilder>>> {
        match self.inner.try_lock() {
            Ok(guard) => Ok(guard),
            // A panic cannot happen while the builder is locked; if one did, the builder's
            // state is still consistent (each call changes it last).
            Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
            Err(TryLockError::WouldBlock) => Err(errors::builder(
                "the JaxprBuilder is in use (a re-entrant call from an abstract_eval rule, \
                 or a call from another thread)",
            )),
        }
    }

    /// Runs `f` on the IR builder, if it has not built yet.
    fn with<T>(&self, f: impl FnOnce(&mut IrBuilder) -> Result<T>) -> Result<T> {
        let mut guard = self.lock()?;
        match guard.as_mut() {
            Some(b) => f(b),
            None => Err(already_built()),
        }
    }

    fn var(&self, id: VarId, aval: AbstractValue) -> Var {
        Var {
            origin: Origin::Builder(self.id),
            id,
            aval,
        }
    }

    /// Reads an equation input or output: a `Var` of this builder or a `Literal`.
    fn input(&self, obj: &Bound<'_, PyAny>) -> Result<Input> {
        if let Ok(v) = obj.cast::<Var>() {
            return Ok(Input::Var(self.own_var(v.get())?));
        }
        if let Ok(l) = obj.cast::<Literal>() {
            return Ok(Input::Lit(l.get().lit));
        }
        Err(Error::Py(PyTypeError::new_err(format!(
            "expected a Var or a Literal, got {}",
            describe(obj)
        ))))
    }

    fn own_var(&self, v: &Var) -> Result<VarId> {
        match v.origin {
            Origin::Builder(id) if id == self.id => Ok(v.id),
            Origin::Builder(_) => Err(errors::type_check(format!(
                "variable from another jaxpr: {}:{} was made by another JaxprBuilder",
                v.id, v.aval
            ))),
            Origin::Jaxpr(_) => Err(errors::type_check(format!(
                "variable from another jaxpr: {}:{} belongs to a built Jaxpr, not to this \
                 JaxprBuilder",
                v.id, v.aval
            ))),
        }
    }

    fn inputs(&self, seq: &Bound<'_, PyAny>) -> Result<Vec<Input>> {
        if let Ok(list) = seq.cast::<PyList>() {
            return list.iter().map(|x| self.input(&x)).collect();
        }
        if let Ok(tuple) = seq.cast::<PyTuple>() {
            return tuple.iter().map(|x| self.input(&x)).collect();
        }
        if seq.is_instance_of::<PyString>() {
            return Err(Error::Py(PyTypeError::new_err(
                "expected a sequence of Var or Literal, got a str",
            )));
        }
        let mut out = Vec::new();
        for x in seq.try_iter()? {
            out.push(self.input(&x?)?);
        }
        Ok(out)
    }

    fn outvars(&self, seq: &Bound<'_, PyAny>) -> Result<Vec<VarId>> {
        let mut out = Vec::new();
        for x in seq.try_iter()? {
            let x = x?;
            match x.cast::<Var>() {
                Ok(v) => out.push(self.own_var(v.get())?),
                Err(_) => {
                    return Err(Error::Py(PyTypeError::new_err(format!(
                        "equation outputs must be Vars, got {}",
                        describe(&x)
                    ))))
                }
            }
        }
        Ok(out)
    }

    fn new_vars(&self, py: Python<'_>, made: Vec<(VarId, AbstractValue)>) -> PyResult<Py<PyList>> {
        let vars = made
            .into_iter()
            .map(|(id, aval)| Py::new(py, self.var(id, aval)))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyList::new(py, vars)?.unbind())
    }

    /// The shared `ShapedArray` object of this type (made on first use).
    fn shared_aval(&self, py: Python<'_>, aval: &AbstractValue) -> PyResult<Py<ShapedArray>> {
        let mut cache = self.avals_cache()?;
        if let Some(obj) = cache.get(aval) {
            return Ok(obj.clone_ref(py));
        }
        let obj = Py::new(py, ShapedArray::from_aval(aval.clone()))?;
        cache.insert(aval.clone(), obj.clone_ref(py));
        Ok(obj)
    }

    /// Records `aval` as the shared object of its type, unless the type has one.
    fn share_aval(&self, aval: &Bound<'_, ShapedArray>) -> Result<()> {
        let mut cache = self.avals_cache()?;
        let key = &aval.get().aval;
        if !cache.contains_key(key) {
            cache.insert(key.clone(), aval.clone().unbind());
        }
        Ok(())
    }

    fn avals_cache(&self) -> PyResult<MutexGuard<'_, AvalCache>> {
        match self.avals.try_lock() {
            Ok(guard) => Ok(guard),
            Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
            Err(TryLockError::WouldBlock) => Err(errors::builder(
                "the JaxprBuilder is in use (a call from another thread)",
            )
            .into()),
        }
    }

    /// Adds an equation of tracer inputs (see `add_eqn_traced`); its outputs' variables
    /// and types.
    fn add_traced(
        &self,
        primitive: Primitive,
        inputs: &Bound<'_, PyAny>,
        params: &Bound<'_, PyAny>,
    ) -> Result<Vec<(VarId, AbstractValue)>> {
        let params = read_params(&primitive, params)?;
        let atom_name = intern!(inputs.py(), "atom");
        let read_one = |x: Bound<'_, PyAny>| -> Result<Input> {
            if x.cast::<Var>().is_ok() || x.cast::<Literal>().is_ok() {
                self.input(&x)
            } else {
                self.input(&x.getattr(atom_name)?)
            }
        };
        let read = match inputs.cast::<PyList>() {
            Ok(list) => list.iter().map(read_one).collect::<Result<Vec<_>>>()?,
            Err(_) => {
                let mut read = Vec::new();
                for x in inputs.try_iter()? {
                    read.push(read_one(x?)?);
                }
                read
            }
        };
        self.with(|b| {
            let atoms = to_atoms(b, read);
            typed_outputs(b, primitive, atoms, params)
        })
    }

    /// The tracer of one of this builder's variables (see `new_tracer`).
    fn tracer<'py>(
        &self,
        py: Python<'py>,
        id: VarId,
        aval: AbstractValue,
        make: &Bound<'py, PyType>,
        trace: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let shared = self.shared_aval(py, &aval)?;
        let var = Py::new(py, self.var(id, aval))?;
        new_tracer(make, trace, var.into_any(), shared)
    }

    /// Declares a variable with `declare` and returns it as a `Var`.
    fn declare(
        &self,
        aval: &ShapedArray,
        declare: impl FnOnce(&mut IrBuilder, AbstractValue) -> VarId,
    ) -> Result<Var> {
        let aval = aval.aval.clone();
        let id = self.with(|b| Ok(declare(b, aval.clone())))?;
        Ok(self.var(id, aval))
    }

    fn finish(
        &self,
        outvars: &Bound<'_, PyAny>,
        build: impl FnOnce(
            IrBuilder,
            Vec<Atom>,
        ) -> std::result::Result<ferrax_ir::Jaxpr, ferrax_ir::TypeError>,
    ) -> Result<Jaxpr> {
        let outs = self.inputs(outvars)?;
        let (builder, atoms) = {
            let mut guard = self.lock()?;
            let Some(mut builder) = guard.take() else {
                return Err(already_built());
            };
            let atoms = to_atoms(&mut builder, outs);
            (builder, atoms)
        };
        // Built outside the lock: the typechecker may call extension rules, which may
        // call back into Python.
        let jaxpr = build(builder, atoms)?;
        Ok(Jaxpr::new(Arc::new(jaxpr)))
    }
}

/// A new, uninitialized instance of a class (its `tp_alloc`, as `object.__new__` does).
fn alloc_instance<'py>(cls: &Bound<'py, PyType>) -> PyResult<Bound<'py, PyAny>> {
    let py = cls.py();
    let tp = cls.as_type_ptr();
    // SAFETY: `tp` is a live type object; `tp_alloc` of a class returns a new reference or
    // NULL with an exception set, which `from_owned_ptr_or_err` turns into an error.
    unsafe {
        let slot = pyo3::ffi::PyType_GetSlot(tp, pyo3::ffi::Py_tp_alloc);
        let alloc: pyo3::ffi::allocfunc = if slot.is_null() {
            pyo3::ffi::PyType_GenericAlloc
        } else {
            std::mem::transmute::<*mut std::ffi::c_void, pyo3::ffi::allocfunc>(slot)
        };
        Bound::from_owned_ptr_or_err(py, alloc(tp, 0))
    }
}

/// The last `n` values, in the order they were made last to first (the children of the
/// container `stage_args` is rebuilding, first child first).
fn take_children<'py>(values: &mut Vec<Bound<'py, PyAny>>, n: usize) -> Vec<Bound<'py, PyAny>> {
    let at = values.len().saturating_sub(n);
    let mut children = values.split_off(at);
    children.reverse();
    children
}

/// A node of an argument tree `stage_args` takes, in pre-order.
enum ArgNode<'py> {
    Leaf(AbstractValue),
    Tuple(usize),
    List(usize),
    /// A dict with str keys: its keys in sorted order, which its children follow.
    Dict(Vec<Bound<'py, PyString>>),
    None,
}

/// How many nodes `stage_args` reads before leaving a tree to Python (a tree that holds
/// itself never ends).
const STAGE_ARGS_MAX_NODES: usize = 1 << 16;

/// The nodes of `args` in pre-order (dict children in sorted key order, as `tree_flatten`
/// orders them), or None when it holds anything but tuples, lists and dicts (of exactly
/// those classes; dicts with str keys), None, `numpy.ndarray`s of IR dtypes and Python
/// scalars. Calls no Python code.
fn arg_nodes<'py>(args: &Bound<'py, PyAny>, x64: bool) -> PyResult<Option<Vec<ArgNode<'py>>>> {
    let mut nodes = Vec::new();
    let mut stack = vec![args.clone()];
    while let Some(x) = stack.pop() {
        // Nodes read and nodes waiting: a wide tree that holds itself stops here too.
        if nodes.len() + stack.len() >= STAGE_ARGS_MAX_NODES {
            return Ok(None);
        }
        if let Ok(t) = x.cast_exact::<PyTuple>() {
            nodes.push(ArgNode::Tuple(t.len()));
            let at = stack.len();
            stack.extend(t.iter());
            stack[at..].reverse();
        } else if let Ok(l) = x.cast_exact::<PyList>() {
            nodes.push(ArgNode::List(l.len()));
            let at = stack.len();
            stack.extend(l.iter());
            stack[at..].reverse();
        } else if let Ok(d) = x.cast_exact::<PyDict>() {
            let mut items = Vec::with_capacity(d.len());
            for (k, v) in d.iter() {
                let Ok(key) = k.cast_exact::<PyString>() else {
                    return Ok(None);
                };
                let Ok(text) = key.to_str() else {
                    return Ok(None);
                };
                // Python orders strs by code point, as Rust orders their UTF-8 bytes.
                items.push((text.to_owned(), key.clone(), v));
            }
            items.sort_by(|a, b| a.0.cmp(&b.0));
            let mut keys = Vec::with_capacity(items.len());
            let at = stack.len();
            for (_, key, value) in items {
                keys.push(key);
                stack.push(value);
            }
            stack[at..].reverse();
            nodes.push(ArgNode::Dict(keys));
        } else if x.is_none() {
            nodes.push(ArgNode::None);
        } else {
            // Typed as `aval_of` types them (keep in step).
            let aval = if x.is_exact_instance_of::<PyFloat>() {
                let d = if x64 { DType::F64 } else { DType::F32 };
                AbstractValue::scalar(d).with_weak_type(true)
            } else if x.is_exact_instance_of::<PyBool>() {
                AbstractValue::scalar(DType::Bool)
            } else if x.is_exact_instance_of::<PyInt>() {
                let d = if x64 { DType::I64 } else { DType::I32 };
                AbstractValue::scalar(d).with_weak_type(true)
            } else {
                match numpy_array_aval(&x, x64)? {
                    Some(aval) => aval,
                    None => return Ok(None),
                }
            };
            nodes.push(ArgNode::Leaf(aval));
        }
    }
    Ok(Some(nodes))
}

/// A tracer: a new instance of `make`, made without calling its `__init__`, with its
/// attributes `_trace`, `atom` and `aval` set (what `JaxprTracer.__init__` sets).
fn new_tracer<'py>(
    make: &Bound<'py, PyType>,
    trace: &Bound<'py, PyAny>,
    atom: Py<PyAny>,
    aval: Py<ShapedArray>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = make.py();
    let obj = alloc_instance(make)?;
    obj.setattr(intern!(py, "_trace"), trace)?;
    obj.setattr(intern!(py, "atom"), atom)?;
    obj.setattr(intern!(py, "aval"), aval)?;
    Ok(obj)
}

/// Reads an equation's params: a mapping, or a `Params` made for the primitive. An empty
/// dict (the common case while tracing) needs no schema lookup.
fn read_params(primitive: &Primitive, params: &Bound<'_, PyAny>) -> Result<Params> {
    match params.cast::<PyDict>() {
        Ok(d) if d.is_empty() => Ok(Params::empty()),
        Ok(_) => params_from_py(primitive, params),
        Err(_) => match params.cast::<PyParams>() {
            Ok(p) => p.get().for_primitive(primitive),
            Err(_) => params_from_py(primitive, params),
        },
    }
}

/// Adds an equation and returns its output variables with their types (each output is
/// a variable the builder just made, so it has one).
fn typed_outputs(
    b: &mut IrBuilder,
    primitive: Primitive,
    atoms: Vec<Atom>,
    params: Params,
) -> Result<Vec<(VarId, AbstractValue)>> {
    let outs = b.add_eqn(primitive, atoms, params)?;
    Ok(outs
        .into_iter()
        .filter_map(|v| b.var_aval(v).map(|aval| (v, aval.clone())))
        .collect())
}

fn already_built() -> Error {
    errors::builder("this JaxprBuilder has already built its jaxpr; use a new builder")
}

fn to_atoms(b: &mut IrBuilder, inputs: Vec<Input>) -> Vec<Atom> {
    inputs
        .into_iter()
        .map(|i| match i {
            Input::Var(v) => Atom::Var(v),
            Input::Lit(l) => b.literal(l),
        })
        .collect()
}

/// Reads the primitive argument: a built-in's name or an `ExtensionPrimitive`.
pub(crate) fn primitive_from_py(obj: &Bound<'_, PyAny>) -> Result<Primitive> {
    if let Ok(s) = obj.cast::<PyString>() {
        let name = s.to_str()?;
        return Builtin::from_name(name)
            .map(Primitive::Builtin)
            .ok_or_else(|| errors::type_check(format!("unknown primitive '{name}'")));
    }
    if let Ok(e) = obj.cast::<ExtensionPrimitive>() {
        return Ok(e.get().primitive());
    }
    Err(Error::Py(PyTypeError::new_err(format!(
        "a primitive is a built-in's name or an ExtensionPrimitive, got {}",
        describe(obj)
    ))))
}

/// Reads a literal's value for `dtype`: bools for `bool`; ints (and bools, as 0/1) for
/// integer dtypes, in range; bools, ints and floats for float dtypes.
fn literal_value(value: &Bound<'_, PyAny>, dtype: DType) -> Result<LitValue> {
    let bad = || {
        errors::type_check(format!(
            "literal {} does not fit dtype {}",
            describe(value),
            dtype.numpy_name()
        ))
    };
    let is_bool = value.is_instance_of::<PyBool>()
        || matches!(crate::avals::type_name(value).as_str(), "bool" | "bool_");
    let v = if dtype == DType::Bool {
        if !is_bool {
            return Err(bad());
        }
        LitValue::Bool(value.extract::<bool>().map_err(|_| bad())?)
    } else if dtype.is_float() {
        LitValue::Float(value.extract::<f64>().map_err(|_| bad())?)
    } else if is_bool {
        LitValue::Int(i64::from(value.extract::<bool>().map_err(|_| bad())?))
    } else if value.is_instance_of::<PyFloat>() {
        return Err(bad());
    } else {
        match value.extract::<i64>() {
            Ok(i) => LitValue::Int(i),
            // A u64 above i64::MAX is held as its bits (see `LitValue::Int`).
            Err(_) if dtype == DType::U64 && value.extract::<u64>().is_ok() => {
                LitValue::Int(value.extract::<u64>().map_err(|_| bad())? as i64)
            }
            Err(_) if value.is_instance_of::<PyInt>() => return Err(bad()),
            Err(e) => return Err(Error::Py(e)),
        }
    };
    Ok(v)
}

#[pymethods]
impl JaxprBuilder {
    /// A builder. `axis_env` (a mapping of axis name to size: the named axes of the
    /// enclosing shard_maps, for a shard_map body's builder) makes collectives naming
    /// other axes errors; without it, collectives are checked leniently (their axes
    /// are not looked up; `all_to_all` then needs them).
    #[new]
    #[pyo3(signature = (axis_env = None))]
    fn py_new(axis_env: Option<&Bound<'_, PyAny>>) -> Result<JaxprBuilder> {
        let inner = match axis_env {
            Some(m) if !m.is_none() => {
                IrBuilder::with_axis_env(crate::params::axis_env_from_py(m)?)
            }
            _ => IrBuilder::new(),
        };
        Ok(JaxprBuilder {
            id: NEXT_BUILDER_ID.fetch_add(1, Ordering::Relaxed),
            inner: Mutex::new(Some(inner)),
            avals: Mutex::new(AvalCache::default()),
        })
    }

    /// Declares the next constant variable.
    #[pyo3(signature = (aval))]
    fn add_constvar(&self, aval: &Bound<'_, ShapedArray>) -> Result<Var> {
        let var = self.declare(aval.get(), IrBuilder::add_constvar)?;
        self.share_aval(aval)?;
        Ok(var)
    }

    /// Declares the next input variable.
    #[pyo3(signature = (aval))]
    fn add_invar(&self, aval: &Bound<'_, ShapedArray>) -> Result<Var> {
        let var = self.declare(aval.get(), IrBuilder::add_invar)?;
        self.share_aval(aval)?;
        Ok(var)
    }

    /// A fresh variable, not yet bound: bind it with `add_eqn_with_outvars`.
    #[pyo3(signature = (aval))]
    fn new_var(&self, aval: PyRef<'_, ShapedArray>) -> Result<Var> {
        self.declare(&aval, IrBuilder::new_var)
    }

    /// A scalar literal of this dtype (not tied to a builder: any builder accepts it).
    #[pyo3(signature = (value, dtype, weak_type = false))]
    fn literal(
        &self,
        value: &Bound<'_, PyAny>,
        dtype: &Bound<'_, PyAny>,
        weak_type: bool,
    ) -> Result<Literal> {
        let dtype = dtype_from_py(dtype)?;
        let lit = IrLiteral {
            value: literal_value(value, dtype)?,
            dtype,
            weak_type,
        };
        if !lit.is_well_typed() {
            return Err(errors::type_check(format!(
                "literal {} does not fit dtype {}",
                describe(value),
                dtype.numpy_name()
            )));
        }
        Ok(Literal { lit })
    }

    /// Applies a primitive (a built-in's name or an `ExtensionPrimitive`) to inputs: runs
    /// its shape rule and returns the fresh output variables. A rule failure is a
    /// `TypeCheckError` naming the equation.
    #[pyo3(signature = (primitive, inputs, params))]
    fn add_eqn(
        &self,
        py: Python<'_>,
        primitive: &Bound<'_, PyAny>,
        inputs: &Bound<'_, PyAny>,
        params: &Bound<'_, PyAny>,
    ) -> Result<Py<PyList>> {
        let primitive = primitive_from_py(primitive)?;
        let inputs = self.inputs(inputs)?;
        let params = read_params(&primitive, params)?;
        let made = self.with(|b| {
            let atoms = to_atoms(b, inputs);
            typed_outputs(b, primitive, atoms, params)
        })?;
        Ok(self.new_vars(py, made)?)
    }

    /// `add_eqn` for tracing: returns a `(var, aval)` pair per output, where `aval` is the
    /// variable's type as one `ShapedArray` object per type for this builder (the same
    /// object `add_invar`/`add_constvar` were given for that type, if they were), so
    /// equal types are identical objects.
    #[pyo3(signature = (primitive, inputs, params))]
    fn add_eqn_typed(
        &self,
        py: Python<'_>,
        primitive: &Bound<'_, PyAny>,
        inputs: &Bound<'_, PyAny>,
        params: &Bound<'_, PyAny>,
    ) -> Result<Py<PyList>> {
        let primitive = primitive_from_py(primitive)?;
        let params = read_params(&primitive, params)?;
        let made = self.with(|b| {
            // Inputs straight to atoms (one allocation): reading them calls no Python code.
            let atoms = match inputs.cast::<PyList>() {
                Ok(list) => {
                    let mut atoms = Vec::with_capacity(list.len());
                    for x in list.iter() {
                        atoms.push(match self.input(&x)? {
                            Input::Var(v) => Atom::Var(v),
                            Input::Lit(l) => b.literal(l),
                        });
                    }
                    atoms
                }
                Err(_) => to_atoms(b, self.inputs(inputs)?),
            };
            typed_outputs(b, primitive, atoms, params)
        })?;
        let list = PyList::empty(py);
        for (id, aval) in made {
            let shared = self.shared_aval(py, &aval)?;
            let var = Py::new(py, self.var(id, aval))?;
            list.append(PyTuple::new(py, [var.into_any(), shared.into_any()])?)?;
        }
        Ok(list.unbind())
    }

    /// `add_eqn_typed` for tracers: each input is a `Var`, a `Literal`, or an object whose
    /// `atom` attribute is one; each output is a new instance of the class `make`, created
    /// without calling its `__init__`, with its attributes `_trace`, `atom` and `aval` set
    /// to `trace`, the output variable and its shared `ShapedArray`.
    #[pyo3(signature = (primitive, inputs, params, make, trace))]
    fn add_eqn_traced<'py>(
        &self,
        py: Python<'py>,
        primitive: &Bound<'py, PyAny>,
        inputs: &Bound<'py, PyAny>,
        params: &Bound<'py, PyAny>,
        make: &Bound<'py, PyType>,
        trace: &Bound<'py, PyAny>,
    ) -> Result<Bound<'py, PyList>> {
        let made = self.add_traced(primitive_from_py(primitive)?, inputs, params)?;
        let list = PyList::empty(py);
        for (id, aval) in made {
            list.append(self.tracer(py, id, aval, make, trace)?)?;
        }
        Ok(list)
    }

    /// `add_eqn_traced` of a primitive with one output: returns that output's tracer
    /// itself. A primitive with another number of outputs is a `TypeError` (after its
    /// equation is recorded).
    #[pyo3(signature = (primitive, inputs, params, make, trace))]
    fn add_eqn_traced_one<'py>(
        &self,
        py: Python<'py>,
        primitive: &Bound<'py, PyAny>,
        inputs: &Bound<'py, PyAny>,
        params: &Bound<'py, PyAny>,
        make: &Bound<'py, PyType>,
        trace: &Bound<'py, PyAny>,
    ) -> Result<Bound<'py, PyAny>> {
        let primitive = primitive_from_py(primitive)?;
        let mut made = self.add_traced(primitive.clone(), inputs, params)?;
        match (made.pop(), made.is_empty()) {
            (Some((id, aval)), true) => Ok(self.tracer(py, id, aval, make, trace)?),
            _ => Err(Error::Py(PyTypeError::new_err(format!(
                "add_eqn_traced_one: {} does not have one output",
                primitive.name()
            )))),
        }
    }

    /// Declares an input variable per leaf of the pytree `args` and returns the same tree
    /// with a tracer (made as `add_eqn_traced` makes them) in place of each leaf, in one
    /// call: the leaves in `tree_flatten`'s order, containers rebuilt as
    /// `tree_unflatten` rebuilds them (dicts in sorted key order). Leaves are typed as
    /// `aval_of` types them (`x64`: the mode). None, with nothing declared, when `args`
    /// holds anything but tuples, lists, dicts with str keys, None, `numpy.ndarray`s of
    /// IR dtypes and Python scalars: the caller then stages it the general way. (An
    /// error raised while making the tracers, out of memory, leaves inputs declared: the
    /// builder is then for discarding.)
    #[pyo3(signature = (args, make, trace, x64))]
    fn stage_args<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyAny>,
        make: &Bound<'py, PyType>,
        trace: &Bound<'py, PyAny>,
        x64: bool,
    ) -> Result<Option<Bound<'py, PyAny>>> {
        let Some(nodes) = arg_nodes(args, x64)? else {
            return Ok(None);
        };
        let ids = self.with(|b| {
            Ok(nodes
                .iter()
                .filter_map(|n| match n {
                    ArgNode::Leaf(aval) => Some((b.add_invar(aval.clone()), aval)),
                    _ => None,
                })
                .collect::<Vec<_>>())
        })?;
        let mut tracers = Vec::with_capacity(ids.len());
        for (id, aval) in ids {
            tracers.push(self.tracer(py, id, aval.clone(), make, trace)?);
        }
        // The nodes in reverse pre-order: each container's children are then the last
        // values made, last child first.
        let mut values: Vec<Bound<'py, PyAny>> = Vec::with_capacity(nodes.len());
        for node in nodes.iter().rev() {
            let value = match node {
                ArgNode::Leaf(_) => match tracers.pop() {
                    Some(t) => t,
                    None => return Err(errors::builder("stage_args: a leaf without its tracer")),
                },
                ArgNode::None => py.None().into_bound(py),
                ArgNode::Tuple(n) => PyTuple::new(py, take_children(&mut values, *n))?.into_any(),
                ArgNode::List(n) => PyList::new(py, take_children(&mut values, *n))?.into_any(),
                ArgNode::Dict(keys) => {
                    let dict = PyDict::new(py);
                    for (key, value) in keys.iter().zip(take_children(&mut values, keys.len())) {
                        dict.set_item(key, value)?;
                    }
                    dict.into_any()
                }
            };
            values.push(value);
        }
        Ok(values.pop())
    }

    /// Records the equations of `jaxpr` (no constvars) applied to `inputs` (tracers,
    /// `Var`s or `Literal`s, one per invar), as `add_eqn_traced` would one by one, in one
    /// call; returns one tracer (made as `add_eqn_traced` makes them) per output of
    /// `jaxpr`. Used to stage a jaxpr computed elsewhere (a transposed one) inline.
    #[pyo3(signature = (jaxpr, inputs, make, trace))]
    fn inline_traced<'py>(
        &self,
        py: Python<'py>,
        jaxpr: PyRef<'py, Jaxpr>,
        inputs: &Bound<'py, PyAny>,
        make: &Bound<'py, PyType>,
        trace: &Bound<'py, PyAny>,
    ) -> Result<Bound<'py, PyList>> {
        let j = Arc::clone(&jaxpr.inner);
        let atom_name = intern!(py, "atom");
        let mut read = Vec::new();
        for x in inputs.try_iter()? {
            let x = x?;
            if x.cast::<Var>().is_ok() || x.cast::<Literal>().is_ok() {
                read.push(self.input(&x)?);
            } else {
                read.push(self.input(&x.getattr(atom_name)?)?);
            }
        }
        if !j.constvars().is_empty() || read.len() != j.invars().len() {
            return Err(Error::Py(PyTypeError::new_err(format!(
                "inline_traced: the jaxpr takes {} constants and {} inputs, got {} inputs",
                j.constvars().len(),
                j.invars().len(),
                read.len()
            ))));
        }
        // What each variable of `jaxpr` is in the builder: a variable, or a literal.
        let outs: Vec<(Input, AbstractValue)> = self.with(|b| {
            let mut env: Vec<Option<Input>> = vec![None; j.num_vars()];
            for (v, a) in j.invars().iter().zip(read) {
                env[v.index()] = Some(a);
            }
            let lookup = |env: &[Option<Input>], a: Atom| -> Result<Input> {
                match a {
                    Atom::Lit(l) => Ok(Input::Lit(*j.literal(l))),
                    Atom::Var(v) => env[v.index()].clone().ok_or_else(|| {
                        Error::Py(PyTypeError::new_err(
                            "inline_traced: a variable is used before it is defined",
                        ))
                    }),
                }
            };
            for eqn in j.eqns() {
                let ins = eqn
                    .inputs()
                    .iter()
                    .map(|&a| lookup(&env, a))
                    .collect::<Result<Vec<_>>>()?;
                let atoms = to_atoms(b, ins);
                let new = b.add_eqn(eqn.primitive().clone(), atoms, eqn.params().clone())?;
                for (old, new) in eqn.outvars().iter().zip(new) {
                    env[old.index()] = Some(Input::Var(new));
                }
            }
            j.outvars()
                .iter()
                .map(|&a| Ok((lookup(&env, a)?, j.atom_aval(a))))
                .collect()
        })?;
        let list = PyList::empty(py);
        for (atom, aval) in outs {
            let shared = self.shared_aval(py, &aval)?;
            let atom_obj: Py<PyAny> = match atom {
                Input::Var(id) => Py::new(py, self.var(id, aval))?.into_any(),
                Input::Lit(lit) => Py::new(py, Literal { lit })?.into_any(),
            };
            list.append(new_tracer(make, trace, atom_obj, shared)?)?;
        }
        Ok(list)
    }

    /// Adds an equation binding variables made by `new_var`, in any order of dependency.
    /// Nothing is checked until `build` / `build_toposorted`.
    #[pyo3(signature = (primitive, inputs, params, outvars))]
    fn add_eqn_with_outvars(
        &self,
        primitive: &Bound<'_, PyAny>,
        inputs: &Bound<'_, PyAny>,
        params: &Bound<'_, PyAny>,
        outvars: &Bound<'_, PyAny>,
    ) -> Result<()> {
        let primitive = primitive_from_py(primitive)?;
        let inputs = self.inputs(inputs)?;
        let params = read_params(&primitive, params)?;
        let outvars = self.outvars(outvars)?;
        self.with(|b| {
            let atoms = to_atoms(b, inputs);
            b.add_eqn_with_outvars(primitive, atoms, params, outvars);
            Ok(())
        })
    }

    /// Finishes the jaxpr with these outputs, typechecked (what `add_eqn` checked as it
    /// went is not checked again; a builder that used `new_var` is checked whole). The
    /// builder is spent afterwards, whether or not the jaxpr is well typed.
    #[pyo3(signature = (outvars))]
    fn build(&self, outvars: &Bound<'_, PyAny>) -> Result<Jaxpr> {
        self.finish(outvars, IrBuilder::build)
    }

    /// Orders the equations so each follows the definitions of its inputs (keeping the
    /// order where it already is one), then builds. A dependency cycle is a
    /// `TypeCheckError`.
    #[pyo3(signature = (outvars))]
    fn build_toposorted(&self, outvars: &Bound<'_, PyAny>) -> Result<Jaxpr> {
        self.finish(outvars, IrBuilder::build_toposorted)
    }

    fn __repr__(&self) -> String {
        let state = match self.inner.try_lock() {
            Ok(guard) => match guard.as_ref() {
                Some(b) => format!("{} eqns", b.num_eqns()),
                None => "built".to_owned(),
            },
            Err(_) => "in use".to_owned(),
        };
        format!("JaxprBuilder(id={}, {state})", self.id)
    }
}
