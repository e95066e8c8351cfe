"""Test-suite setup: four CPU devices in the test process, for ferrax and for jax alike
(the sharding and collective tests compare the two on meshes of up to four devices).
XLA reads the flag when a client is made, so it is set before either loads."""

import os

_FLAG = "--xla_force_host_platform_device_count"
if _FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" {_FLAG}=4").strip()
