"""The transformations, one module each: they know the core, not the primitives."""
