"""``GoalConditionedEnergyHead``: the energy of a proof state for proving a theorem's goal.

Input ``[z_state; z_goal; z_state ⊙ z_goal]`` (each of width ``d``, standardised with the training
set's per-dimension mean and std, kept as buffers) → ``hidden_sizes`` (SiLU, dropout) → 1, every
linear layer under spectral norm, the output divided by a learnable temperature.  Lower energy = more
provable.

Why these pieces (SPEC §4.6): spectral norm bounds how fast the energy can change with the
embedding (the published EBM otherwise over-fitted the few positives); the temperature is the only
scale of the energy, so InfoNCE has no temperature of its own; it learns at its own rate
(``ebm.temperature_learning_rate``, :func:`burnqed.ebm.train.make_optimizer`) so the energy can
reach the log-prob's scale of nats, and a temperature pinned at a bound is a health signal
(:mod:`burnqed.ebm.train` says when it aborts).  The first layer's weights are scaled ×0.1 at init: under spectral
norm a weight scale would be normalised away, so the ×0.1 is a fixed gain on the normalised first
layer — its spectral norm is 0.1, the others' 1 — which starts the energies near zero.

The temperature is ``exp(log_temperature)`` clamped to ``[temperature_min, temperature_max]``; at a
bound its gradient is zero, i.e. it is pinned.

Example::

    >>> import torch
    >>> head = GoalConditionedEnergyHead(8, hidden_sizes=(16, 8))
    >>> head(torch.randn(5, 8), torch.randn(5, 8)).shape
    torch.Size([5])
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import torch
from torch import nn
from torch.nn.utils.parametrizations import spectral_norm

FIRST_LAYER_SCALE = 0.1


class GoalConditionedEnergyHead(nn.Module):
    def __init__(
        self,
        dim: int,
        *,
        hidden_sizes: Sequence[int] = (2048, 1024, 512),
        dropout: float = 0.15,
        temperature_init: float = 1.0,
        temperature_min: float = 0.05,
        temperature_max: float = 20.0,
    ) -> None:
        super().__init__()
        if not temperature_min < temperature_init < temperature_max:
            raise ValueError(
                f"temperature_init {temperature_init} must lie strictly between "
                f"temperature_min {temperature_min} and temperature_max {temperature_max}"
            )
        self.dim = dim
        self.temperature_min = float(temperature_min)
        self.temperature_max = float(temperature_max)
        sizes = [3 * dim, *hidden_sizes, 1]
        self.layers = nn.ModuleList(
            spectral_norm(nn.Linear(a, b)) for a, b in itertools.pairwise(sizes)
        )
        self.act = nn.SiLU()
        self.drop = nn.Dropout(dropout)
        self.register_buffer("first_layer_scale", torch.tensor(FIRST_LAYER_SCALE))
        self.register_buffer("input_mean", torch.zeros(dim))
        self.register_buffer("input_std", torch.ones(dim))
        self.log_temperature = nn.Parameter(torch.tensor(math.log(temperature_init)))
        # The remaining-steps readout's level (remaining_steps, set_remaining_level).
        self.remaining_bias = nn.Parameter(torch.tensor(0.0))

    def set_input_stats(self, embeddings: torch.Tensor) -> None:
        """Standardise inputs with the per-dimension mean/std of ``embeddings`` ``(N, d)``."""
        self.input_mean.copy_(embeddings.mean(0))
        self.input_std.copy_(embeddings.std(0).clamp(min=1e-6))

    @torch.no_grad()
    def set_remaining_level(self, remaining: torch.Tensor) -> None:
        """Start the remaining-steps readout's level at the mean of the training positives'
        remaining proof steps ``remaining`` ``(G,)`` (a fresh head's energies sit near 0)."""
        self.remaining_bias.fill_(float(remaining.float().mean()))

    def parameter_groups(self) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
        """The spectral-normed layers' parameters (``layers.…``) and the scale parameters outside
        spectral norm (``log_temperature``, ``remaining_bias``), each in ``named_parameters``
        order: the scale learns at its own rate (:func:`burnqed.ebm.train.make_optimizer`, joint
        training's optimiser).

        >>> [len(g) for g in GoalConditionedEnergyHead(4, hidden_sizes=(3,)).parameter_groups()]
        [4, 2]
        """
        layers, scale = [], []
        for name, p in self.named_parameters():
            (layers if name.startswith("layers.") else scale).append(p)
        return layers, scale

    def remaining_steps(self, energies: torch.Tensor) -> torch.Tensor:
        """The remaining proof steps read from energies: ``E + remaining_bias`` — one unit of
        energy is one step, the level is the bias's (InfoNCE is blind to a common shift, so a
        level pinned to the steps would hold the temperature where the steps' level puts it).
        Only the training loss reads it (:func:`burnqed.ebm.train.value_loss`); the search ranks
        by the energy, which the bias does not enter."""
        return energies + self.remaining_bias

    @property
    def temperature(self) -> torch.Tensor:
        lo, hi = math.log(self.temperature_min), math.log(self.temperature_max)
        return self.log_temperature.clamp(lo, hi).exp()

    def pinned(self, rel: float = 1e-3) -> str | None:
        """``"floor"``/``"ceiling"`` when the temperature sits at a bound, else None."""
        t = float(self.log_temperature.detach())
        if t <= math.log(self.temperature_min) + rel:
            return "floor"
        if t >= math.log(self.temperature_max) - rel:
            return "ceiling"
        return None

    def features(self, z_state: torch.Tensor, z_goal: torch.Tensor) -> torch.Tensor:
        s = (z_state - self.input_mean) / self.input_std  # (..., d)
        g = (z_goal - self.input_mean) / self.input_std  # (..., d)
        return torch.cat([s, g, s * g], dim=-1)  # (..., 3d)

    def forward(self, z_state: torch.Tensor, z_goal: torch.Tensor) -> torch.Tensor:
        """Energies ``(...,)`` of states ``(..., d)`` for goals ``(..., d)`` (broadcast)."""
        z_state, z_goal = torch.broadcast_tensors(z_state, z_goal)
        x = self.features(z_state, z_goal)
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i == 0:
                x = x * self.first_layer_scale
            if i < len(self.layers) - 1:
                x = self.drop(self.act(x))
        return x.squeeze(-1) / self.temperature

    @torch.no_grad()
    def layer_spectral_norms(self) -> list[float]:
        """Largest singular value of each layer's effective weight (first layer with its gain)."""
        out = []
        for i, layer in enumerate(self.layers):
            s = torch.linalg.matrix_norm(layer.weight.float(), ord=2).item()
            out.append(s * (float(self.first_layer_scale) if i == 0 else 1.0))
        return out
