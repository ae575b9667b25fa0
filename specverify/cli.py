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
    if args.what == "stats":
        from .bench import stats as bstats

        bstats.main(vocab=args.vocab[0] if args.vocab else 4096, quick=args.quick)
        return 0
    raise SystemExit(f"unknown benchmark {args.what!r}")


def _reference(args) -> int:
    from .algorithms.conformance import write_vectors

    path = write_vectors(args.out)
    print(f"wrote {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="specverify", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)

    b = sub.add_parser("bench", help="benchmarks, printed as ratios against a baseline from the same run")
    b.add_argument("what", choices=["sampler", "stats"])
    b.add_argument("--vocab", type=int, action="append", help="vocabulary size (repeatable)")
    b.add_argument("--gamma", type=int, action="append", help="gamma (repeatable)")
    b.add_argument("--batch", type=int, default=1024)
    b.add_argument("--no-torch", action="store_true")
    b.add_argument("--quick", action="store_true", help="fewer simulations (stats)")
    b.set_defaults(func=_bench)

    r = sub.add_parser("reference", help="regenerate the conformance vectors")
    r.add_argument("--out", default="reference")
    r.set_defaults(func=_reference)

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
