"""Kernels on the JAX backend as JAX functions: JAX arrays in and out, inside a user's ``jax.jit`` (one XLA program),
under ``jax.vmap``, and ``jax.grad`` through a softmax and an attention kernel against finite differences."""

import jax
import jax.numpy as jnp
import numpy as np

from kernels.softmax import softmax_rows
from kernels.vit_attn.kernel import attention_kernel
from tests.kernels import formulas as ref


def _x(shape, seed=0, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def test_jax_arrays_in_jax_arrays_out_and_numpy_accepted():
    x = _x((256, 64))
    from_jax = softmax_rows(jnp.asarray(x), backend="jax")
    from_numpy = softmax_rows(x, backend="jax")
    assert isinstance(from_jax, jax.Array) and isinstance(from_numpy, jax.Array)
    np.testing.assert_array_equal(np.asarray(from_jax), np.asarray(from_numpy))
    ref.assert_close(np.asarray(from_jax), softmax_rows(x), 1e-6, 1e-7)


def test_a_kernel_call_composes_inside_a_users_jit_into_one_program():
    x = _x((256, 64))

    def model(x):
        return jnp.tanh(softmax_rows(x * 2.0, backend="jax")) @ jnp.ones((64, 3))

    jaxpr = str(jax.make_jaxpr(model)(x))
    assert "callback" not in jaxpr  # the kernel is JAX operations, not a call back into Python
    got = jax.jit(model)(x)
    want = np.tanh(softmax_rows(x * 2.0)) @ np.ones((64, 3))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


def test_vmap_over_a_batch_equals_one_call_per_element():
    xs = _x((3, 128, 64))
    got = jax.vmap(lambda x: softmax_rows(x, backend="jax"))(xs)
    for b in range(3):
        np.testing.assert_array_equal(np.asarray(got[b]), np.asarray(softmax_rows(xs[b], backend="jax")))


def _check_gradient(f, x, seed=0, eps=1e-2, directions=3):
    """``jax.grad`` of ``sum(w * f(x))`` against central differences of the same loss on the NumPy reference, along
    random directions (fp32 kernels: eps=1e-2 keeps both truncation and rounding error near 1e-4 relative)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(np.shape(f(x, "numpy"))).astype(np.float32)
    loss = lambda x, backend: jnp.sum(w * f(x, backend))
    grad = np.asarray(jax.grad(lambda x: loss(x, "jax"))(jnp.asarray(x)))
    assert np.isfinite(grad).all()
    for _ in range(directions):
        v = rng.standard_normal(x.shape).astype(np.float32)
        fd = (float(loss(x + eps * v, "numpy")) - float(loss(x - eps * v, "numpy"))) / (2 * eps)
        np.testing.assert_allclose(float(np.sum(grad * v)), fd, rtol=2e-2, atol=2e-3)


def test_grad_through_a_softmax_kernel_matches_finite_differences():
    _check_gradient(lambda x, backend: softmax_rows(x, backend=backend), _x((128, 32), scale=2.0))


def test_grad_through_an_attention_kernel_matches_finite_differences():
    # The library's ViT attention, 50 tokens: one ragged query tile under masks, exp, max, matmuls, transposes.
    q, k, v = _x((1, 2, 50, 32), 1), _x((1, 2, 50, 32), 2), _x((1, 2, 50, 32), 3)

    def wrt_q(q, backend):
        return attention_kernel(q, k, v, backend=backend)

    def wrt_v(v, backend):
        return attention_kernel(q, k, v, backend=backend)

    _check_gradient(wrt_q, q)
    _check_gradient(wrt_v, v, seed=1)
