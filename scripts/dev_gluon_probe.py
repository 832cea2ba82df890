"""Print the installed Triton's Gluon API surface (names + signatures) for the Hopper path."""
import inspect
import triton
print("triton", triton.__version__)
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
mods = {"gluon": gluon, "gl": gl}
try:
    from triton.experimental.gluon.language.nvidia import hopper
    mods["hopper"] = hopper
    from triton.experimental.gluon.language.nvidia.hopper import tma, mbarrier
    mods["hopper.tma"] = tma
    mods["hopper.mbarrier"] = mbarrier
except Exception as e:
    print("hopper import failed", e)
try:
    from triton.experimental.gluon.language.amd import cdna4
    mods["cdna4"] = cdna4
except Exception as e:
    print("cdna4 import failed", e)
for name, m in mods.items():
    print("==", name, sorted(x for x in dir(m) if not x.startswith("_")))
for fn in ["warpgroup_mma", "warpgroup_mma_wait", "fence_async_shared"]:
    try:
        print(fn, inspect.signature(getattr(mods["hopper"], fn)))
    except Exception as e:
        print(fn, "?", e)
for fn in ["BlockedLayout", "NVMMASharedLayout", "NVMMADistributedLayout", "DotOperandLayout", "SliceLayout",
           "allocate_shared_memory", "convert_layout", "arange", "load", "store", "full", "zeros", "reshape",
           "join", "split", "permute", "sum", "max", "where", "static_range", "SwizzledSharedLayout",
           "AutoLayout", "expand_dims", "broadcast", "to_tensor"]:
    o = getattr(gl, fn, None)
    try:
        print("gl." + fn, inspect.signature(o.__init__ if inspect.isclass(o) else o) if o is not None else "MISSING")
    except Exception as e:
        print("gl." + fn, "sig?", e)
try:
    print("NVMMASharedLayout.get_default_for", inspect.signature(gl.NVMMASharedLayout.get_default_for))
except Exception as e:
    print("no get_default_for", e)
try:
    from triton.experimental.gluon.language.amd import cdna4
    print("cdna4.mfma_scaled", inspect.signature(cdna4.mfma_scaled))
except Exception as e:
    print(e)
