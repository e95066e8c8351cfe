//! `ExtensionPrimitive`: a primitive defined from Python, whose shape rule is a Python
//! callable the IR calls back (with the interpreter attached).

use crate::avals::{describe, ShapedArray};
use crate::errors::Result;
use crate::jaxpr::ClosedJaxpr;
use crate::params::params_to_py;
use ferrax_ir::jaxpr::ClosedJaxpr as IrClosedJaxpr;
use ferrax_ir::params::Params;
use ferrax_ir::primitive::Primitive;
use ferrax_ir::AbstractValue;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};
use std::cell::RefCell;
use std::sync::Arc;

thread_local! {
    /// The last exception an extension rule raised on this thread, with the message it
    /// became. The `TypeCheckError` that reports the message takes it as its `__cause__`
    /// (so the rule's traceback is kept); the next rule call clears it.
    static RULE_EXCEPTION: RefCell<Option<(String, PyErr)>> = const { RefCell::new(None) };
}

/// The exception behind an extension rule's error message, if it is the last one raised.
pub fn take_rule_exception(message: &str) -> Option<PyErr> {
    RULE_EXCEPTION
        .try_with(|slot| match slot.try_borrow_mut() {
            Ok(mut slot) => match slot.take() {
                Some((m, err)) if m == message => Some(err),
                _ => None,
            },
            Err(_) => None,
        })
        .ok()
        .flatten()
}

fn set_rule_exception(value: Option<(String, PyErr)>) {
    // Dropping a previous exception here may run Python code (a finalizer), which may
    // call a rule again: replace the value first, drop it after the borrow ends.
    let previous = RULE_EXCEPTION
        .try_with(|slot| match slot.try_borrow_mut() {
            Ok(mut slot) => std::mem::replace(&mut *slot, value),
            Err(_) => None,
        })
        .ok()
        .flatten();
    drop(previous);
}

/// The IR's view of an extension primitive: its name, the Python shape rule and the
/// optional Python transpose rule.
pub struct PyRule {
    name: String,
    rule: Py<PyAny>,
    transpose: Option<Py<PyAny>>,
    inline_transpose: bool,
}

impl PyRule {
    fn call(
        &self,
        py: Python<'_>,
        inputs: &[AbstractValue],
        params: &Params,
    ) -> PyResult<std::result::Result<Vec<AbstractValue>, String>> {
        let avals = PyList::new(py, inputs.iter().cloned().map(ShapedArray::from_aval))?;
        let params = params_to_py(py, params)?;
        let result = self.rule.bind(py).call1((avals, params))?;
        if result.is_instance_of::<ShapedArray>() || result.is_instance_of::<PyString>() {
            return Ok(Err(not_a_sequence(&result)));
        }
        let Ok(items) = result.try_iter() else {
            return Ok(Err(not_a_sequence(&result)));
        };
        let mut outs = Vec::new();
        for item in items {
            let item = item?;
            match item.cast::<ShapedArray>() {
                Ok(a) => outs.push(a.get().aval.clone()),
                Err(_) => return Ok(Err(not_a_sequence(&result))),
            }
        }
        Ok(Ok(outs))
    }
}

/// Calls the transpose rule: `Err(message)` if it returned something else than a
/// `ClosedJaxpr`.
fn call_transpose(
    py: Python<'_>,
    rule: &Py<PyAny>,
    inputs: &[AbstractValue],
    linear: &[bool],
    params: &Params,
) -> PyResult<std::result::Result<IrClosedJaxpr, String>> {
    let avals = PyList::new(py, inputs.iter().cloned().map(ShapedArray::from_aval))?;
    let linear = PyList::new(py, linear.iter().copied())?;
    let params = params_to_py(py, params)?;
    let result = rule.bind(py).call1((avals, linear, params))?;
    Ok(match result.cast::<ClosedJaxpr>() {
        Ok(j) => Ok(j.get().inner.clone()),
        Err(_) => Err(format!(
            "the transpose rule must return a ClosedJaxpr, got {}",
            describe(&result)
        )),
    })
}

/// Runs a Python rule with the interpreter attached, turning an exception it raises
/// into its `TypeName: message` (and keeping the exception for the error's cause).
fn run_rule<T>(
    f: impl FnOnce(Python<'_>) -> PyResult<std::result::Result<T, String>>,
) -> std::result::Result<T, String> {
    Python::try_attach(|py| {
        set_rule_exception(None);
        match f(py) {
            Ok(result) => result,
            Err(err) => {
                let text = exception_text(py, &err);
                set_rule_exception(Some((text.clone(), err)));
                Err(text)
            }
        }
    })
    .unwrap_or_else(|| Err("the Python interpreter is not available".to_owned()))
}

fn not_a_sequence(result: &Bound<'_, PyAny>) -> String {
    format!(
        "abstract_eval must return a sequence of ShapedArray, got {}",
        describe(result)
    )
}

/// `TypeName: message` of a Python exception.
fn exception_text(py: Python<'_>, err: &PyErr) -> String {
    let type_name = err
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".to_owned());
    let message = err
        .value(py)
        .str()
        .map(|s| s.to_string())
        .unwrap_or_default();
    if message.is_empty() {
        type_name
    } else {
        format!("{type_name}: {message}")
    }
}

impl ferrax_ir::ExtensionPrimitive for PyRule {
    fn name(&self) -> &str {
        &self.name
    }

    fn abstract_eval(
        &self,
        inputs: &[AbstractValue],
        params: &Params,
    ) -> std::result::Result<Vec<AbstractValue>, String> {
        run_rule(|py| self.call(py, inputs, params))
    }

    fn has_transpose_rule(&self) -> bool {
        self.transpose.is_some()
    }

    fn inline_transpose(&self) -> bool {
        self.inline_transpose
    }

    fn transpose(
        &self,
        inputs: &[AbstractValue],
        linear: &[bool],
        params: &Params,
    ) -> std::result::Result<IrClosedJaxpr, String> {
        let Some(rule) = &self.transpose else {
            return Err(format!("{} has no transpose rule", self.name));
        };
        run_rule(|py| call_transpose(py, rule, inputs, linear, params))
    }
}

/// A primitive defined from Python. `abstract_eval(avals, params)` is its shape rule: it
/// gets the operands' `ShapedArray`s and the params as a dict, and returns the outputs'
/// `ShapedArray`s; an exception it raises becomes a `TypeCheckError` of the equation,
/// carrying the exception's type name and message.
///
/// `transpose(avals, linear, params)`, if given, is its transpose rule: it gets the
/// operands' `ShapedArray`s, one flag per operand saying whether it is linear, and the
/// params, and returns a `ClosedJaxpr` taking the non-linear operands (in order) then
/// one cotangent per output, and returning one cotangent per linear operand. The
/// transpose pass calls it as a `jit` named `transpose(<name>)` (or, with
/// `inline_transpose`, copies its equations in place); an exception it raises (or a
/// jaxpr of the wrong signature) becomes a `PassError` carrying its message.
#[pyclass(frozen, module = "ferrax._ir", name = "ExtensionPrimitive")]
pub struct ExtensionPrimitive {
    pub(crate) rule: Arc<PyRule>,
}

impl ExtensionPrimitive {
    /// The IR primitive.
    pub fn primitive(&self) -> Primitive {
        Primitive::Extension(self.rule.clone())
    }
}

#[pymethods]
impl ExtensionPrimitive {
    #[new]
    #[pyo3(signature = (name, abstract_eval, transpose=None, inline_transpose=false))]
    fn py_new(
        name: &str,
        abstract_eval: &Bound<'_, PyAny>,
        transpose: Option<&Bound<'_, PyAny>>,
        inline_transpose: bool,
    ) -> Result<ExtensionPrimitive> {
        // The IR's rule for names (an identifier, not a keyword of the text, not a
        // built-in's), so every jaxpr using the primitive prints as text that reads back.
        if let Err(err) = ferrax_ir::primitive::check_primitive_name(name) {
            return Err(PyValueError::new_err(err.to_string()).into());
        }
        if !abstract_eval.is_callable() {
            return Err(PyTypeError::new_err(format!(
                "abstract_eval must be callable, got {}",
                describe(abstract_eval)
            ))
            .into());
        }
        let transpose = transpose.filter(|t| !t.is_none());
        if let Some(t) = transpose {
            if !t.is_callable() {
                return Err(PyTypeError::new_err(format!(
                    "transpose must be callable or None, got {}",
                    describe(t)
                ))
                .into());
            }
        }
        Ok(ExtensionPrimitive {
            rule: Arc::new(PyRule {
                name: name.to_owned(),
                rule: abstract_eval.clone().unbind(),
                transpose: transpose.map(|t| t.clone().unbind()),
                inline_transpose,
            }),
        })
    }

    /// Whether the transpose pass copies the rule's equations in place instead of
    /// calling them as a `jit` named `transpose(<name>)`.
    #[getter]
    fn inline_transpose(&self) -> bool {
        self.rule.inline_transpose
    }

    /// The name printed in jaxpr text.
    #[getter]
    fn name(&self) -> &str {
        &self.rule.name
    }

    /// The shape rule.
    #[getter]
    fn abstract_eval(&self, py: Python<'_>) -> Py<PyAny> {
        self.rule.rule.clone_ref(py)
    }

    /// The transpose rule, or `None`.
    #[getter]
    fn transpose(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.rule.transpose.as_ref().map(|t| t.clone_ref(py))
    }

    fn __repr__(&self) -> String {
        format!("ExtensionPrimitive('{}')", self.rule.name)
    }
}
