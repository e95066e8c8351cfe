use pyo3::prelude::*;
#[pymodule]
fn _ir(_m: &Bound<'_, PyModule>) -> PyResult<()> { Ok(()) }
