"""GoalConditionedEnergyHead: shape, spectral norms, first-layer scale, temperature, gradients."""

from __future__ import annotations

import math

import pytest
import torch

from burnqed.ebm.head import FIRST_LAYER_SCALE, GoalConditionedEnergyHead


def _head(**kw) -> GoalConditionedEnergyHead:
    torch.manual_seed(0)
    return GoalConditionedEnergyHead(8, hidden_sizes=(32, 16, 8), dropout=0.0, **kw)


def test_output_is_one_energy_per_state_and_goals_broadcast():
    head = _head()
    assert head(torch.randn(5, 8), torch.randn(5, 8)).shape == (5,)
    # (B, 1+K, d) states against one goal per group
    assert head(torch.randn(3, 4, 8), torch.randn(3, 1, 8)).shape == (3, 4)
    assert head.layers[0].in_features == 3 * 8  # [z_s; z_g; z_s ⊙ z_g]


def test_spectral_norm_of_every_layer_after_power_iteration():
    head = _head()
    head.train()
    for _ in range(30):  # each training-mode forward runs one power iteration per layer
        head(torch.randn(4, 8), torch.randn(4, 8))
    norms = head.layer_spectral_norms()
    assert len(norms) == 4
    assert norms[0] == pytest.approx(FIRST_LAYER_SCALE, rel=0.05)
    for s in norms[1:]:
        assert s == pytest.approx(1.0, rel=0.05)


def test_first_layer_output_is_scaled_by_a_tenth():
    torch.manual_seed(0)
    head = GoalConditionedEnergyHead(8, hidden_sizes=(16,), dropout=0.0).eval()
    zs, zg = torch.randn(6, 8), torch.randn(6, 8)
    x = head.features(zs, zg)
    first, last = head.layers
    by_hand = last(torch.nn.functional.silu(FIRST_LAYER_SCALE * first(x))).squeeze(-1)
    torch.testing.assert_close(head(zs, zg), by_hand / head.temperature)
    unscaled = last(torch.nn.functional.silu(first(x))).squeeze(-1)
    assert not torch.allclose(head(zs, zg), unscaled / head.temperature)


def test_temperature_divides_the_energy():
    head = _head().eval()
    zs, zg = torch.randn(7, 8), torch.randn(7, 8)
    e1 = head(zs, zg)
    with torch.no_grad():
        head.log_temperature.fill_(math.log(2.5))
    assert head.temperature.item() == pytest.approx(2.5)
    torch.testing.assert_close(head(zs, zg), e1 / 2.5)


def test_temperature_is_clamped_and_reports_pinning():
    head = _head(temperature_init=1.0, temperature_min=0.5, temperature_max=3.0)
    assert head.pinned() is None
    with torch.no_grad():
        head.log_temperature.fill_(math.log(0.1))
    assert head.temperature.item() == pytest.approx(0.5) and head.pinned() == "floor"
    with torch.no_grad():
        head.log_temperature.fill_(math.log(30.0))
    assert head.temperature.item() == pytest.approx(3.0) and head.pinned() == "ceiling"


def test_gradients_reach_every_layer_the_temperature_and_the_remaining_steps_level():
    head = _head()
    head.train()
    e = head(torch.randn(4, 3, 8), torch.randn(4, 1, 8))
    (e.sum() + head.remaining_steps(e[:, 0]).pow(2).sum()).backward()
    for name, p in head.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    assert len([n for n, _ in head.named_parameters() if "original" in n]) == 4


def test_input_standardisation_uses_the_given_statistics():
    head = _head().eval()
    data = torch.randn(100, 8) * 5 + 3
    head.set_input_stats(data)
    torch.testing.assert_close(head.input_mean, data.mean(0))
    shifted = _head().eval()
    shifted.load_state_dict(head.state_dict())
    # Standardised inputs: shifting and scaling every embedding the same way changes nothing.
    zs, zg = torch.randn(3, 8) * 5 + 3, torch.randn(3, 8) * 5 + 3
    shifted.set_input_stats(data * 2 + 1)
    torch.testing.assert_close(head(zs, zg), shifted(zs * 2 + 1, zg * 2 + 1), rtol=1e-4, atol=1e-5)
