//! Lowerings of jaxprs to other IRs.

pub mod stablehlo;
