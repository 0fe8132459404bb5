"""The Markdown table of tools/examples/linearize_wikitext2.sh, from the runs' log.jsonl files:
test perplexity of every run and, for the runs with stage 1, the validation MSE per replaced
layer before and after attention transfer.

    python3 linearize_table.py OUT_DIR PRE FT TRANSFER
"""
import json
import os
import sys


def records(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def test_ppl(run_dir):
    evals = [r for r in records(os.path.join(run_dir, "log.jsonl")) if r.get("kind") == "eval" and r.get("split") == "test"]
    return evals[-1]["ppl"] if evals else float("nan")


def transfer_mse(run_dir):
    """{"before": [...], "after": [...]} and the replaced layers, or None without stage 1."""
    path = os.path.join(run_dir, "transfer", "log.jsonl")
    if not os.path.exists(path):
        return None
    found = {r["when"]: r for r in records(path) if r.get("kind") == "transfer_eval"}
    return found


def mse_text(found):
    if not found:
        return "—"
    layers = found["before"]["layers"]
    return "; ".join(f"L{l}: {b:.3g} → {a:.3g}" for l, b, a in zip(layers, found["before"]["mse"], found["after"]["mse"]))


def main():
    out, pre, ft, transfer = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    rows = [("softmax (SSSS), the trained source", "softmax", f"{pre}")]
    for pattern in ("RRRR", "SRSR"):
        for stage1 in ("copy", "transfer"):
            for tune in ("full", "lora"):
                name = f"{pattern}-{stage1}-{tune}"
                how = ("stage 1 + " if stage1 == "transfer" else "") + ("full fine-tune" if tune == "full" else "LoRA r=8")
                steps = f"{pre} + " + (f"{transfer} transfer + " if stage1 == "transfer" else "") + f"{ft}"
                rows.append((f"{pattern} from softmax, {how}", name, steps))
    rows.append(("ReGLA (RRRR) from scratch", "regla-scratch", f"{pre + ft}"))
    rows.append(("softmax (SSSS) from scratch", "softmax-scratch", f"{pre + ft}"))
    print("| model | steps | test ppl | stage 1: validation MSE per replaced layer, before → after |")
    print("|---|---|---|---|")
    for label, name, steps in rows:
        run_dir = os.path.join(out, name)
        if not os.path.isdir(run_dir):
            continue
        print(f"| {label} | {steps} | {test_ppl(run_dir):.2f} | {mse_text(transfer_mse(run_dir))} |")


if __name__ == "__main__":
    main()
