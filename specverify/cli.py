"""The ``specverify`` command.

    specverify audit reference | --round MOD:FN | --kernel MOD:FN | --generator MOD:FN | --cmd "..."
    specverify selftest
    specverify bench sampler | stats
    specverify reference --out DIR

Exit codes: 0 PASS, 1 FAIL, 2 usage or input error, 3 INCONCLUSIVE.
"""

from __future__ import annotations

import argparse
import sys

EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_INCONCLUSIVE = 0, 1, 2, 3


def _bench(args) -> int:
    if args.what == "sampler":
        from .bench import sampler

        vocabs = tuple(args.vocab) if args.vocab else (32_768, 131_072)
        gammas = tuple(args.gamma) if args.gamma else (4, 8)
        _, rows = sampler.run(vocabs=vocabs, gammas=gammas, batch=args.batch, torch_too=not args.no_torch)
        sampler.print_table(rows)
        return 0
    if args.what == "runner":
        from .bench import runner

        runner.main()
        return 0
    if args.what == "stats":
        from .bench import stats as bstats

        bstats.main(vocab=args.vocab[0] if args.vocab else 4096, quick=args.quick, seeds=args.seeds)
        return 0
    raise SystemExit(f"unknown benchmark {args.what!r}")


def _serve(args) -> int:
    import torch

    from .lm.transformers_lm import early_exit_copy, layered_target, load_local
    from .runners.serve import make_server, serve_forever

    torch.set_num_threads(1)
    if args.model_path:
        target = load_local(args.model_path)
        draft = early_exit_copy(target, layers=1) if args.speculative else None
    else:
        target = layered_target("llama", vocab=args.vocab, hidden=64, layers=6, heads=4, seed=args.seed, lm_head_scale=6.0, keep=2)
        draft = early_exit_copy(target, layers=2) if args.speculative else None
    server = make_server(target, draft, host=args.host, port=args.port, gamma=args.gamma)
    print(f"serving on http://{server.server_address[0]}:{server.server_address[1]}/v1/completions "
          f"({'speculative' if draft is not None else 'target-only'})", flush=True)
    serve_forever(server)
    return 0


def _reference(args) -> int:
    from .algorithms.conformance import write_vectors

    path = write_vectors(args.out)
    print(f"wrote {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="specverify", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)

    b = sub.add_parser("bench", help="benchmarks, printed as ratios against a baseline from the same run")
    b.add_argument("what", choices=["sampler", "stats", "runner"])
    b.add_argument("--vocab", type=int, action="append", help="vocabulary size (repeatable)")
    b.add_argument("--gamma", type=int, action="append", help="gamma (repeatable)")
    b.add_argument("--batch", type=int, default=1024)
    b.add_argument("--no-torch", action="store_true")
    b.add_argument("--quick", action="store_true", help="fewer simulations (stats)")
    b.add_argument("--seeds", type=int, help="stats: seeds per bug (default 5, --quick 1); the table shows medians")
    b.set_defaults(func=_bench)

    r = sub.add_parser("reference", help="regenerate the conformance vectors")
    r.add_argument("--out", default="reference")
    r.set_defaults(func=_reference)

    sv = sub.add_parser("serve", help="serve a local model on an OpenAI-compatible /v1/completions endpoint")
    sv.add_argument("--port", type=int, default=8000)
    sv.add_argument("--host", default="127.0.0.1")
    sv.add_argument("--speculative", action="store_true", help="decode speculatively with a 2-layer early-exit draft")
    sv.add_argument("--model-path", help="a local model directory (else a seeded tiny Llama)")
    sv.add_argument("--seed", type=int, default=0)
    sv.add_argument("--vocab", type=int, default=256)
    sv.add_argument("--gamma", type=int, default=4)
    sv.set_defaults(func=_serve)

    try:
        from .audit import cli as audit_cli

        audit_cli.add_commands(sub)
    except ImportError:  # the audit layer is optional while it is being built
        pass
    return ap


def main(argv=None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
