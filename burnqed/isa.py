"""The instruction-set pin: the same numbers from torch on any x86 CPU with AVX2.

PyTorch's CPU build picks its kernels by the instruction set of the machine it runs on: ATen's
vectorised kernels (softmax, log-softmax, layer norm, SiLU, the normal sampler behind
``torch.randn``, attention), MKL's matrix products and oneDNN's convolutions each dispatch to the
widest level the CPU has, and each level rounds differently.  So an AVX-512 machine trains other
weights and searches other trees than the AVX2 machine the README's table was made on.  Each
library caps its level with an environment variable, read once when the library starts — hence
the pin must be in the environment **before torch (or numpy) is imported**.

Measured on the AMD EPYC (AVX2, no AVX-512) the README's demo ran on, torch 2.13.0+cpu with MKL
2024.2 and oneDNN 3.12, numpy 2.4: each variable set to a *lower* level than the machine's, in a
fresh process, against the same process without it (``docs``: README, "The instruction-set pin")::

    variable (lowered to)              changes                                      pinned to
    ATEN_CPU_CAPABILITY=default        softmax, log_softmax, layer_norm, silu,      avx2
                                       randn, attention: the tiny model's weights
                                       after 12 steps, every search tree
    MKL_CBWR=COMPATIBLE                matmul / linear (MKL sgemm): the weights     AVX2
    MKL_CBWR=SSE4_2 | AVX | AVX2       nothing here: on a non-Intel CPU MKL runs
                                       every branch but COMPATIBLE as AUTO
                                       (MKL_VERBOSE: "CNR:AUTO") — same bytes
    MKL_ENABLE_INSTRUCTIONS=SSE4_2     nothing here (ignored on this CPU)           (not set)
    ONEDNN_MAX_CPU_ISA=SSE41 | AVX     conv2d (oneDNN); not the tiny Llama, whose   AVX2
                                       fp32 matmuls go to MKL
    NPY_DISABLE_CPU_FEATURES=X86_V3    numpy's float32 exp/log/tanh/sin             X86_V4 AVX512_ICL
                                                                                    AVX512_SPR off

On an AVX-512 machine each library *raises* the level by default, which is what the pin takes
back: a Zen 4 machine with ``ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2 ONEDNN_MAX_CPU_ISA=AVX2`` gave
the README's table exactly (issue 29).  On an Intel Xeon with AVX-512 and AMX (torch 2.11.0+cu130,
the same MKL build) the pin brought ATen's kernels to this machine's AVX2 bytes (softmax, layer
norm, SiLU, randn), but MKL's sgemm differs between Intel and AMD CPUs at every ``MKL_CBWR`` branch
but ``COMPATIBLE`` (which gave the same bytes on both, at ~2× the step time of a small
transformer layer there): MKL's ``AVX2`` branch, Intel's documented way to get the same results on
every Intel CPU with AVX2, makes Intel CPUs agree with each other, and AMD CPUs agree with each
other (MKL runs every branch but ``COMPATIBLE`` as its AMD path there), not the two vendors.  So
the README's table (an AMD CPU) reproduces on AMD x86 CPUs with AVX2; an Intel CPU's numbers may
differ from it in the last bits.  numpy's AVX-512 kernels (float64 exp/log among them, which the
eval's pass@k estimates use) are turned off so numpy stays at the AVX2 level too.

Settings (``cpu_isa`` in params.yaml, :data:`SETTINGS`):

- ``avx2`` (default): the variables of :data:`PINS` — the level of the README's machine, so any
  x86 CPU with AVX2 reproduces the README's table;
- ``native``: no pin — the caller's environment decides, and without one each library uses the
  machine's own best level (fastest; reproduces only that machine's reruns).

:func:`apply_pin` writes the setting's variables into ``os.environ``; it runs where burnqed starts
— the Snakefile at parse time (every job inherits the environment; the SLURM executor submits with
``--export=ALL``), the ``burnqed`` command, the tests' conftest — before torch is imported.  The
project's pin wins over a variable the caller exported (two callers with different levels get the
same bytes); the caller's own values are kept as JSON in ``$BURNQED_ISA_CALLER`` (first
application wins, so a child process records the user's values, not the pin's) and
:func:`pin_record` reports both.  A CPU that cannot honour the pin (not x86, or no AVX2 in
``/proc/cpuinfo``) gets nothing written: the run goes on with its own levels, the record says
``held: false`` and one warning is logged; such a machine reproduces its own reruns, not the
README's table.

Example::

    >>> record = apply_pin("avx2", environ={"ATEN_CPU_CAPABILITY": "default"},
    ...                    flags=frozenset({"avx2", "fma"}), machine="x86_64")
    >>> record["applied"]["ATEN_CPU_CAPABILITY"], record["caller"]["ATEN_CPU_CAPABILITY"]
    ('avx2', 'default')
"""

from __future__ import annotations

import json
import logging
import os
import platform
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

DEFAULT = "avx2"
# What each setting writes.  `native` writes nothing: the caller's environment, else the machine.
PINS: dict[str, dict[str, str]] = {
    "avx2": {
        "ATEN_CPU_CAPABILITY": "avx2",  # ATen's vectorised kernels (read at the first dispatch)
        "MKL_CBWR": "AVX2",  # MKL's conditional numerical reproducibility branch
        "ONEDNN_MAX_CPU_ISA": "AVX2",  # oneDNN's dispatch cap (read at its first primitive)
        # numpy's dispatch targets above AVX2 (names of numpy >= 2.4, constraints.txt); a target the
        # CPU lacks is ignored silently.
        "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
    },
    "native": {},
}
SETTINGS = tuple(PINS)
# Every variable a setting may write: the caller's values of these are recorded.
VARIABLES = tuple(sorted({v for pin in PINS.values() for v in pin}))
# The capability torch reports when a setting holds (torch.backends.cpu.get_cpu_capability()).
CAPABILITY = {"avx2": "AVX2"}
# The /proc/cpuinfo flags a setting needs (torch's AVX2 kernels need FMA too).
NEEDS_FLAGS = {"avx2": frozenset({"avx2", "fma"})}
X86 = frozenset({"x86_64", "amd64", "i386", "i686", "x86"})

DETECT = object()  # default of the `flags` arguments: read this CPU's /proc/cpuinfo

SETTING_VARIABLE = "BURNQED_CPU_ISA"  # the setting in force (set by apply_pin; read by records)
CALLER_VARIABLE = "BURNQED_ISA_CALLER"  # JSON: the caller's values of VARIABLES before any pin


class PinTooLate(RuntimeError):
    """:func:`apply_pin` would change a variable torch has already read: a bug in the entry point."""


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str] | None:
    """The CPU's feature flags from ``/proc/cpuinfo`` (``avx2``, ``fma``, …); None where they are
    unknown (no such file — macOS, Windows — or no ``flags`` line in it)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return None


def can_honour(
    setting: str, *, flags: frozenset[str] | None = None, machine: str | None = None
) -> bool:
    """Whether this CPU can run at ``setting``'s level: x86 with its flags (unknown flags — no
    ``/proc/cpuinfo`` — count as yes; torch's capability decides afterwards)."""
    if not PINS[setting]:
        return True
    machine = (machine or platform.machine()).lower()
    if machine not in X86:
        return False
    return flags is None or NEEDS_FLAGS[setting] <= flags


def check_setting(setting: str) -> str:
    """``setting`` if it is one of :data:`SETTINGS`; ValueError naming them otherwise."""
    if setting not in PINS:
        raise ValueError(f"cpu_isa {setting!r}: expected one of {', '.join(SETTINGS)}")
    return setting


def _importers_of_torch() -> list[str]:
    """Loaded burnqed modules that hold torch at module level (a likely early importer)."""
    torch = sys.modules.get("torch")
    return sorted(
        name
        for name, mod in list(sys.modules.items())
        if name.startswith("burnqed") and torch is not None and torch in vars(mod).values()
    )


def apply_pin(
    setting: str,
    *,
    environ: MutableMapping[str, str] | None = None,
    flags: frozenset[str] | object | None = DETECT,
    machine: str | None = None,
) -> dict[str, Any]:
    """Write ``setting``'s variables into ``environ`` (default ``os.environ``); return what was done:
    ``{"setting", "applied": {var: value}, "caller": {var: value or None}}``.

    The caller's values of :data:`VARIABLES` are recorded once (``$BURNQED_ISA_CALLER``) and are
    what ``native`` restores, so switching settings in one process tree never leaves an earlier
    pin behind.  Raises :class:`PinTooLate` when torch is already imported and the environment
    would change (torch has read the old values); the same values again are a no-op.
    ``flags``/``machine``: the CPU's (default: this one's; tests pass others)."""
    check_setting(setting)
    env = os.environ if environ is None else environ
    flags = cpu_flags() if flags is DETECT else flags
    if CALLER_VARIABLE in env:
        caller = json.loads(env[CALLER_VARIABLE])
    else:
        caller = {v: env.get(v) for v in VARIABLES}
    pin = PINS[setting] if can_honour(setting, flags=flags, machine=machine) else {}
    wanted = {v: pin.get(v, caller.get(v)) for v in VARIABLES}
    changes = {v: w for v, w in wanted.items() if env.get(v) != w}
    if changes and environ is None and "torch" in sys.modules:
        who = _importers_of_torch()
        raise PinTooLate(
            f"cpu_isa {setting}: torch was imported before the instruction-set pin"
            + (f" (held at module level by {', '.join(who)})" if who else "")
            + f"; {', '.join(f'{v}={w}' for v, w in changes.items())} would have no effect. "
            "Apply burnqed.isa.apply_pin before anything imports torch."
        )
    for v, w in wanted.items():
        if w is None:
            env.pop(v, None)
        else:
            env[v] = w
    env[CALLER_VARIABLE] = json.dumps(caller, sort_keys=True)
    env[SETTING_VARIABLE] = setting
    return {"setting": setting, "applied": dict(pin), "caller": caller}


def setting_from(params: Mapping[str, Any] | None, environ: Mapping[str, str] | None = None) -> str:
    """The setting an entry point applies: ``cpu_isa`` of its config when it has one, else the one
    a parent process applied (``$BURNQED_CPU_ISA``: the Snakefile's), else :data:`DEFAULT`."""
    env = os.environ if environ is None else environ
    if params and params.get("cpu_isa") is not None:
        return check_setting(str(params["cpu_isa"]))
    return check_setting(env.get(SETTING_VARIABLE) or DEFAULT)


def pin_in_force(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``{"setting", "applied"}`` as the environment says now, without torch: what a result's
    fingerprint includes (another setting is another computation)."""
    env = os.environ if environ is None else environ
    setting = env.get(SETTING_VARIABLE)
    return {"setting": setting, "applied": {v: env.get(v) for v in PINS.get(setting or "", {})}}


_warned = False


def pin_record(
    capability: str | None,
    *,
    environ: Mapping[str, str] | None = None,
    flags: frozenset[str] | object | None = DETECT,
    machine: str | None = None,
) -> dict[str, Any]:
    """What the pin did in this process, after torch is imported (``capability``: torch's
    ``get_cpu_capability()``): ``{"setting", "applied", "caller", "held"}``.

    ``setting`` is None when no entry point applied a pin (burnqed used as a library); ``applied``
    the pin's variables as they are now; ``caller`` the values the user had; ``held`` whether torch
    runs at the pinned level with every variable in place (None for ``native`` or no pin).  A pin
    that did not hold logs one warning per process."""
    global _warned
    env = os.environ if environ is None else environ
    setting = env.get(SETTING_VARIABLE)
    caller = json.loads(env[CALLER_VARIABLE]) if CALLER_VARIABLE in env else None
    if setting not in PINS or not PINS[setting]:
        return {"setting": setting, "applied": {}, "caller": caller, "held": None}
    flags = cpu_flags() if flags is DETECT else flags
    honoured = can_honour(setting, flags=flags, machine=machine)  # else apply_pin wrote nothing
    applied = {v: env.get(v) for v in PINS[setting]} if honoured else {}
    held = honoured and applied == PINS[setting] and capability == CAPABILITY[setting]
    if not held and not _warned:
        _warned = True
        log.warning(
            "cpu_isa %s did not hold on this CPU (%s, torch capability %s): results reproduce "
            "this machine's reruns, not the README's table",
            setting,
            machine or platform.machine(),
            capability,
        )
    return {"setting": setting, "applied": applied, "caller": caller, "held": held}


__all__ = [
    "CALLER_VARIABLE",
    "DEFAULT",
    "PINS",
    "SETTINGS",
    "SETTING_VARIABLE",
    "VARIABLES",
    "PinTooLate",
    "apply_pin",
    "can_honour",
    "cpu_flags",
    "pin_in_force",
    "pin_record",
    "setting_from",
]
