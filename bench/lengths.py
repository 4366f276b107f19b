"""Real sequence lengths for the GPU bench, and what a micro-batch of them costs in each layout.

``bench/gpu.py``'s published joint step fills every sequence to its maximum (1,024-token SFT
examples, 512-token states and goals): the one layout with no padding tail, packing's best case.
Real tactic pairs are a few hundred characters.  This bench reads the real data this workplace
holds (``../shared/data``) with burnqed's own readers and turns it into the token lengths
``bench/gpu.py``'s real-length sections draw from (``bench/lengths.json``, written by ``--write``):

- **SFT examples**: LeanDojo Benchmark 4's sample (:func:`burnqed.data.readers.read_leandojo`: 16
  traced tactics of 10 Mathlib theorems — the source of the real run's tactic pairs, and a thin
  sample of it), each as training tokenises it (:func:`burnqed.data.prompt.format_example`: the
  state's prompt, then the tactic and EOS as the completion; BOS before the prompt);
- **states and goals**: the 488 root goals of miniF2F (:func:`burnqed.data.readers.read_deepseek`,
  DeepSeek's copy pinned by the benchmark registry) — the real run's search pool is miniF2F's
  ``valid`` split, whose trees the groups' states come from — each as the value model embeds it
  (:func:`burnqed.data.prompt.format_prompt` and BOS, :func:`burnqed.data.prompt.state_ids`).

**Characters per token: 3.0, an assumption** (``--chars-per-token``): no real tokenizer is reachable
here.  DeepSeek-Prover-V2's 102,400-token BPE was trained on code and mathematics; Lean's long
dotted identifiers split into several tokens and its Unicode operators (``⊢ → ∀ ℝ``) take one to
three, so Lean text is taken to be denser than English prose (~4 characters a token).  The first
real run measures it with the model's own tokenizer; every length here scales with it.

Then it draws micro-batches at a configuration's shape (``config/a100-7b.yaml``: 8 SFT examples
and 4 groups of ``1 + ebm.negatives`` states and a goal; a sequence longer than ``sft.max_length``
or ``sft.joint_state_max_length`` is not drawn, as the data stage and joint training leave such
pairs and groups out) and prints what each layout makes of them: the packed row sized to its tokens
(:func:`burnqed.train.packing.bucket_width`), the row of the most tokens a micro-batch could hold
(the layout before issue 62), and the right-padded batch (every row padded to the longest).

Prints (parameters first; these figures last, one ``name=value`` a line):

- ``sft_examples``: SFT examples read
- ``states``: states and goals read
- ``sft_tokens_median``: tokens of an SFT example, median
- ``sft_tokens_p90``: tokens of an SFT example, 90th percentile
- ``state_tokens_median``: tokens of a state or goal, median
- ``state_tokens_p90``: tokens of a state or goal, 90th percentile
- ``micro_batch_tokens_mean``: real tokens of a drawn micro-batch, mean
- ``packed_positions_mean``: positions of its packed row, the real tokens rounded up to a bucket
- ``packed_padding_share``: the share of those positions that is padding
- ``fixed_row_padding_share``: the share of padding in a row of the most positions a micro-batch
  could fill (26,624 at ``config/a100-7b.yaml``: the packed row before issue 62)
- ``padded_positions_mean``: positions of the right-padded batch (rows × the longest row)
- ``padded_padding_share``: the share of those that is padding

Example::

    python bench/lengths.py --write   # read ../shared/data, write bench/lengths.json, print
    python bench/lengths.py --smoke   # fewer draws (CI); reads bench/lengths.json without the data
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import statistics
import sys
from pathlib import Path

from burnqed.config import EBMConfig, SFTConfig, load_params

REPO = Path(__file__).resolve().parents[1]
LENGTHS = REPO / "bench" / "lengths.json"
DATA = REPO.parent / "shared" / "data"  # the workplace's copy: ../shared/data beside the checkout
CHARS_PER_TOKEN = 3.0
# The files read, under DATA: the reader that reads each is the one the data stage uses.
LEANDOJO = "leandojo-sample/leandojo_benchmark_4/random/test.json"
MINIF2F = "minif2f/minif2f.jsonl"

log = logging.getLogger("bench.lengths")


def out(name: str, value: object) -> None:
    if isinstance(value, float):
        value = f"{value:.4g}"
    print(f"{name}={value}", flush=True)


def tokens(text: str, chars_per_token: float) -> int:
    """Tokens of ``text`` at ``chars_per_token`` (rounded up: a text is at least one token)."""
    return max(1, math.ceil(len(text) / chars_per_token))


def read_lengths(data: Path, chars_per_token: float = CHARS_PER_TOKEN) -> dict:
    """The token lengths of the SFT examples and of the states and goals in ``data`` (module
    docstring): ``sft`` a list of ``[prompt, completion]`` tokens (BOS in the prompt, EOS in the
    completion), ``states`` a list of tokens (BOS included), with the sources and the assumption."""
    from burnqed.data.benchmarks import sha256_file
    from burnqed.data.prompt import format_example, format_prompt
    from burnqed.data.readers import read_deepseek, read_leandojo

    pairs = read_leandojo(data / LEANDOJO).to_pylist()
    goals = [t.goal for t in read_deepseek(data / MINIF2F) if t.goal]
    sft = []
    for row in pairs:
        ex = format_example(row["state_before"], row["tactic"])
        sft.append([tokens(ex["prompt"], chars_per_token) + 1,
                    tokens(ex["completion"], chars_per_token) + 1])  # fmt: skip
    sources = {
        "sft": {"file": LEANDOJO, "sha256": sha256_file(data / LEANDOJO),
                "reader": "burnqed.data.readers.read_leandojo", "rows": len(sft)},
        "states": {"file": MINIF2F, "sha256": sha256_file(data / MINIF2F),
                   "reader": "burnqed.data.readers.read_deepseek", "rows": len(goals)},
    }  # fmt: skip
    return {
        "what": "token lengths of real tactic pairs (SFT examples) and of real goals (states and "
        "goals), at an assumed characters-per-token; written by bench/lengths.py --write",
        "chars_per_token": chars_per_token,
        "sources": sources,
        "sft": sft,
        "states": [tokens(format_prompt(g), chars_per_token) + 1 for g in goals],
    }


def dumps(lengths: dict) -> str:
    """``lengths`` as ``bench/lengths.json`` holds it: the sources indented, each list on a line."""
    lists = ("sft", "states")
    head = json.dumps({k: v for k, v in lengths.items() if k not in lists}, indent=1)
    body = ",\n".join(f" {json.dumps(k)}: {json.dumps(lengths[k])}" for k in lists)
    return f"{head[:-2]},\n{body}\n}}\n"


def load(path: Path = LENGTHS) -> dict:
    """``bench/lengths.json`` (what :func:`read_lengths` wrote)."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no length table (python bench/lengths.py --write)")
    return json.loads(path.read_text(encoding="utf-8"))


def draw(
    lengths: dict, sft: SFTConfig, group_size: int, rng: random.Random, *, groups: bool = True
) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """One micro-batch's lengths at ``sft``'s shape: ``sft.batch_size`` ``(prompt, completion)``
    SFT examples, then ``sft.joint_groups_per_step`` groups of ``group_size`` states and their
    goals (none without ``groups``), drawn with replacement from those that fit their bounds."""
    examples = [tuple(e) for e in lengths["sft"] if sum(e) <= sft.max_length]
    states = [n for n in lengths["states"] if n <= sft.joint_state_max_length]
    if not examples or not states:
        raise ValueError("no SFT example or state of the length table fits the configured bounds")
    g = sft.joint_groups_per_step if groups else 0
    return (
        [rng.choice(examples) for _ in range(sft.batch_size)],
        [rng.choice(states) for _ in range(g * group_size)],
        [rng.choice(states) for _ in range(g)],
    )


def layouts(
    draws: list[tuple[list[tuple[int, int]], list[int], list[int]]], most: int
) -> dict[str, float]:
    """Mean real tokens and positions of ``draws`` in each layout (module docstring), and the
    padding shares (positions summed over the draws)."""
    from burnqed.train.packing import bucket_width

    real = packed = padded = 0
    for sft_rows, states, goals in draws:
        rows = [p + c for p, c in sft_rows] + states + goals
        real += sum(rows)
        packed += bucket_width(sum(rows), most)
        padded += len(rows) * max(rows)
    n = len(draws)
    return {
        "micro_batch_tokens_mean": real / n,
        "packed_positions_mean": packed / n,
        "packed_padding_share": 1 - real / packed,
        "fixed_row_padding_share": 1 - real / (most * n),
        "padded_positions_mean": padded / n,
        "padded_padding_share": 1 - real / padded,
    }


def _quantile(xs: list[int], q: float) -> float:
    return float(statistics.quantiles(xs, n=10, method="inclusive")[int(q * 10) - 1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=str(DATA), help="the shared data directory (../shared/data)")
    p.add_argument("--chars-per-token", type=float, default=CHARS_PER_TOKEN,
                   help="the assumed characters per token (module docstring)")  # fmt: skip
    p.add_argument("--params", default=str(REPO / "params.yaml"))
    p.add_argument("--configfile", action="append", default=None,
                   help="overlays (default: config/a100-7b.yaml)")  # fmt: skip
    p.add_argument("--draws", type=int, default=2000, help="micro-batches drawn")
    p.add_argument("--write", action="store_true", help=f"write {LENGTHS.relative_to(REPO)}")
    p.add_argument("--smoke", action="store_true", help="100 draws; the table when no data (CI)")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    data = Path(args.data)
    if (data / LEANDOJO).is_file() and (data / MINIF2F).is_file():
        lengths = read_lengths(data, args.chars_per_token)
        out("source", "shared_data")
    elif args.smoke:
        lengths = load()
        out("source", LENGTHS.relative_to(REPO))
    else:
        print(f"bench/lengths.py: no {LEANDOJO} and {MINIF2F} under {data} (--data)",
              file=sys.stderr)  # fmt: skip
        return 2
    if args.write:
        LENGTHS.write_text(dumps(lengths), encoding="utf-8")
        out("written", LENGTHS.relative_to(REPO))
    overlays = args.configfile if args.configfile is not None else [REPO / "config/a100-7b.yaml"]
    params = load_params(args.params, overlays)
    sft = SFTConfig.from_dict(params["sft"])
    k1 = EBMConfig.from_dict(params["ebm"]).negatives + 1
    from burnqed.train.joint import packed_width

    most = packed_width(sft, k1)
    out("chars_per_token", lengths["chars_per_token"])
    out("micro_batch", f"{sft.batch_size}x<={sft.max_length}+{sft.joint_groups_per_step}x"
        f"({k1}+1)x<={sft.joint_state_max_length}")  # fmt: skip
    out("most_positions", most)
    draws = 100 if args.smoke else args.draws
    out("draws", draws)
    sft_tokens = [p + c for p, c in lengths["sft"]]
    out("sft_examples", len(sft_tokens))
    out("states", len(lengths["states"]))
    out("sft_tokens_median", float(statistics.median(sft_tokens)))
    out("sft_tokens_p90", _quantile(sft_tokens, 0.9))
    out("state_tokens_median", float(statistics.median(lengths["states"])))
    out("state_tokens_p90", _quantile(lengths["states"], 0.9))
    rng = random.Random(0)
    for name, value in layouts([draw(lengths, sft, k1, rng) for _ in range(draws)], most).items():
        out(name, value)
    return 0


if __name__ == "__main__":
    sys.exit(main())
