"""LayerNorm, in the style of the legacy NKI layernorm tutorial: normalise each row to zero mean and unit
variance, then scale by ``gamma`` and shift by ``beta``.

* ``nki_layernorm_kernel_v1``: ``nl.mean`` of ``x`` and of ``x^2`` (var = E[x^2] - E[x]^2), reductions without
  keepdims, ``nl.rsqrt`` and broadcast parameter tiles.
* ``nki_layernorm_kernel_var``: ``nl.mean``/``nl.var`` with keepdims.
* ``nki_layernorm_kernel_v2``: ``nisa.bn_stats`` over chunks of ``bn_stats_fmax`` columns, ``nisa.bn_aggr``
  and ``nisa.tensor_scalar`` with two fused operators.
"""

import math

import numpy as np

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl


@nki.jit
def nki_layernorm_kernel_v1(input_tensor, epsilon, gamma_vector, beta_vector):
    output_tensor = nl.ndarray(input_tensor.shape, dtype=input_tensor.dtype, buffer=nl.shared_hbm)
    assert input_tensor.shape[1] == gamma_vector.shape[0] == beta_vector.shape[0]

    i_p_io = nl.arange(nl.tile_size.pmax)[:, None]
    i_f_io = nl.arange(input_tensor.shape[1])[None, :]
    i_p_param = nl.arange(1)[:, None]
    num_rows = input_tensor.shape[0]

    gamma_sb = nl.load(gamma_vector.reshape((1, gamma_vector.shape[0]))[i_p_param, i_f_io])
    beta_sb = nl.load(beta_vector.reshape((1, beta_vector.shape[0]))[i_p_param, i_f_io])

    for i in nl.affine_range(math.ceil(input_tensor.shape[0] / nl.tile_size.pmax)):
        input_sb = nl.load(input_tensor[i * nl.tile_size.pmax + i_p_io, i_f_io],
                           mask=(i * nl.tile_size.pmax + i_p_io < num_rows))
        mean = nl.mean(input_sb, axis=1)
        var = nl.mean(nl.square(input_sb), axis=1) - mean * mean
        shift_scale_tensor = (input_sb - mean) * nl.rsqrt(var + epsilon)
        output_sb = shift_scale_tensor * gamma_sb.broadcast_to((nl.tile_size.pmax, gamma_vector.shape[0])) \
            + beta_sb.broadcast_to((nl.tile_size.pmax, beta_vector.shape[0]))
        nl.store(output_tensor[i * nl.tile_size.pmax + i_p_io, i_f_io], value=output_sb,
                 mask=(i * nl.tile_size.pmax + i_p_io < num_rows))
    return output_tensor


@nki.jit
def nki_layernorm_kernel_var(input_tensor, epsilon, gamma_vector, beta_vector):
    output_tensor = nl.ndarray(input_tensor.shape, dtype=input_tensor.dtype, buffer=nl.shared_hbm)
    num_rows, n = input_tensor.shape
    i_p, i_f = nl.mgrid[0:128, 0:n]
    gamma_sb = nl.load(gamma_vector.reshape((1, n)))
    beta_sb = nl.load(beta_vector.reshape((1, n)))
    for i in nl.affine_range(math.ceil(num_rows / 128)):
        rows = i * 128 + i_p
        x = nl.load(input_tensor[rows, i_f], mask=(rows < num_rows), dtype=nl.float32)
        mean = nl.mean(x, axis=[1], keepdims=True)
        var = nl.var(x, axis=[1], keepdims=True)
        y = nl.multiply(x - mean, nl.rsqrt(var + epsilon))
        y = y * gamma_sb + beta_sb
        nl.store(output_tensor[rows, i_f], value=y, mask=(rows < num_rows))
    return output_tensor


@nki.jit
def nki_layernorm_kernel_v2(input_tensor, epsilon, gamma_vector, beta_vector):
    output_tensor = nl.ndarray(input_tensor.shape, dtype=input_tensor.dtype, buffer=nl.shared_hbm)
    num_rows, n = input_tensor.shape
    assert n % nl.tile_size.bn_stats_fmax == 0 or n < nl.tile_size.bn_stats_fmax

    i_p_io = nl.arange(nl.tile_size.pmax)[:, None]
    i_f_io = nl.arange(n)[None, :]
    i_p_param = nl.arange(1)[:, None]

    bn_fmax = min(n, nl.tile_size.bn_stats_fmax)
    num_bn_stats = n // bn_fmax
    i_f_bn = nl.arange(bn_fmax)[None, :]
    i_f_stats = nl.arange(6)[None, :]

    gamma_sb = nl.load(gamma_vector.reshape((1, n))[i_p_param, i_f_io])
    beta_sb = nl.load(beta_vector.reshape((1, n))[i_p_param, i_f_io])

    for i in nl.affine_range(math.ceil(num_rows / nl.tile_size.pmax)):
        rows = i * nl.tile_size.pmax + i_p_io
        input_sb = nl.load(input_tensor[rows, i_f_io], mask=(rows < num_rows))

        bn_stats_result = nl.ndarray((nl.tile_size.pmax, 6 * num_bn_stats), dtype=np.float32)
        for j in nl.affine_range(num_bn_stats):
            bn_stats_result[i_p_io, j * 6 + i_f_stats] = nisa.bn_stats(
                input_sb[i_p_io, j * bn_fmax + i_f_bn], mask=(rows < num_rows), dtype=np.float32)
        mean_var = nisa.bn_aggr(bn_stats_result, mask=(rows < num_rows))
        mean = mean_var[i_p_io, 0]
        var = mean_var[i_p_io, 1]

        rstd = nl.rsqrt(var + epsilon, mask=(rows < num_rows))
        normed = nisa.tensor_scalar(data=input_sb, op0=np.subtract, operand0=mean, op1=np.multiply,
                                    operand1=rstd, mask=(rows < num_rows))
        scaled = nisa.tensor_tensor(normed, gamma_sb.broadcast_to((nl.tile_size.pmax, n)), op=np.multiply,
                                    mask=(rows < num_rows))
        output_sb = nisa.tensor_tensor(scaled, beta_sb.broadcast_to((nl.tile_size.pmax, n)), op=np.add,
                                       dtype=input_tensor.dtype, mask=(rows < num_rows))
        nl.store(output_tensor[rows, i_f_io], value=output_sb, mask=(rows < num_rows))
    return output_tensor
