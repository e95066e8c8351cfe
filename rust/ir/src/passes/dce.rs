//! Dead-code elimination.
