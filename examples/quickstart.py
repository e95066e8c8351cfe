"""ferrax quickstart: read a jaxpr, check it, print it, prune it, and build one."""

import ferrax
from ferrax import core

# A jaxpr as JAX prints it: `x * c + 2`, plus a value nobody uses.
text = """
{ lambda c:f32[8]; x:f32[8] y:f32[]. let
    a:f32[8] = mul x c
    b:f32[8] = add a 2.0:f32[]
    unused:f32[] = sin y
    s:f32[] = reduce_sum[axes=(0,)] b
  in (s, unused) }
"""
jaxpr = core.parse_jaxpr(text)
in_avals, out_avals = core.typecheck(jaxpr)
print("inputs :", [a.str_short() for a in in_avals])
print("outputs:", [a.str_short() for a in out_avals])
print(jaxpr)

# Keep only the first output: the `sin` equation and the input `y` go.
pruned, used_inputs = core.dce(jaxpr, [True, False])
print("used inputs:", used_inputs)
print(pruned)

# The same program, built equation by equation (shape rules run in Rust).
b = core.JaxprBuilder()
c = b.add_constvar(core.ShapedArray((8,), "float32"))
x = b.add_invar(core.ShapedArray((8,), "float32"))
(a,) = b.add_eqn("mul", [x, c], {})
(s,) = b.add_eqn("reduce_sum", [a], {"axes": (0,)})
built = b.build([s])
print(built)

# Mistakes are reported with the equation that caused them.
try:
    core.parse_jaxpr("{ lambda ; x:f32[3] y:f32[4]. let z:f32[3] = add x y in (z,) }")
except ferrax.TypeCheckError as e:
    print("TypeCheckError:", e)
