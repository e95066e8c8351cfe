"""The built-in primitives, one module per family: each defines its primitives, their
eager (NumPy) rules and the ``ferrax.lax`` functions that bind them."""
