"""``State.plan`` caches an access's plan by the access's identity for one lowering: the cache must keep the access
alive, or an access made for one read (a stitched pair's operand read whole, ``stitch.whole_accesses``) that dies
hands its id, and its plan, to the next access made at the same address (a plan of the wrong shape: the ViT
attention kernel's lowering failed on ``float32[69,6,64]`` against ``[197,6,64]`` now and then)."""

from nki_dsl.backends.jax.analysis import KernelInfo
from nki_dsl.backends.jax.context import State
from nki_dsl.ir.affine import Affine
from nki_dsl.ir.nodes import Access, Kernel, Tensor
from nki_dsl.ir.types import Buffer, TensorType


def test_a_plan_is_never_that_of_a_dead_access_at_the_same_address():
    st = State(KernelInfo(Kernel("k", [], [], [])), {}, {}, {}, {})
    t = Tensor("t", TensorType((256, 8), "float32", Buffer.SBUF), "alloc")
    index = (Affine.var("d0"), Affine.var("d1"))
    addresses, wrong = set(), 0
    for n in range(200):  # one access at a time, dropped after its plan (CPython reuses freed addresses)
        rows = 69 if n % 2 else 128
        access = Access(t, index, (rows, 8))
        addresses.add(id(access))
        wrong += st.plan(access).shape != (rows, 8)
        del access
    assert wrong == 0
    assert len(addresses) == 200  # (each access lived while the next was made: none could take its id)
