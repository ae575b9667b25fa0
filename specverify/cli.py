"""The ``specverify`` command.

    specverify audit reference | NAME | --round MOD:FN | --kernel MOD:FN | --generator MOD:FN | --cmd "..."
    specverify audit --endpoint URL [--model DIR|builtin] [--baseline-endpoint URL]
    specverify audit --list-checks
    specverify selftest
    specverify bench sampler | stats | runner | plan
    specverify serve [--speculative] [--port 0] [--model-path DIR]
    specverify conformance --out DIR

Exit codes: 0 PASS, 1 FAIL, 2 usage or input error, 3 INCONCLUSIVE, 4 internal error of specverify,
5 UNSUPPORTED (the implementation declined every setting audited).
The verdict's contract: docs/verdict.md; the shapes an implementation may take: docs/adapters.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn

from . import __version__

# the verdict's exit codes (0 PASS, 1 FAIL, 3 INCONCLUSIVE, 5 UNSUPPORTED) are specverify.audit.front.cli.EXIT
EXIT_USAGE, EXIT_INTERNAL = 2, 4


def _bench(args: argparse.Namespace) -> int:
    if args.what == "sampler":
        from .bench import sampler

        vocabs = tuple(args.vocab) if args.vocab else (32_768, 131_072)
        gammas = tuple(args.gamma) if args.gamma else (4, 8)
        # bench/ and runners/ are annotated separately: their calls are untyped until then
        _, rows = sampler.run(  # type: ignore[no-untyped-call, unused-ignore]
            vocabs=vocabs, gammas=gammas, batch=args.batch, torch_too=not args.no_torch
        )
        sampler.print_table(rows)  # type: ignore[no-untyped-call, unused-ignore]
        return 0
    if args.what == "runner":
        from .bench import runner

        runner.main()  # type: ignore[no-untyped-call, unused-ignore]  # bench/: untyped until annotated
        return 0
    if args.what == "stats":
        from .bench import stats as bstats

        bstats.main(  # type: ignore[no-untyped-call, unused-ignore]  # bench/: untyped until annotated
            vocab=args.vocab[0] if args.vocab else 4096, quick=args.quick, seeds=args.seeds
        )
        return 0
    if args.what == "plan":
        from .bench import plan

        plan.main(shapes=tuple(args.shape) if args.shape else tuple(plan.SHAPES))
        return 0
    raise SystemExit(f"unknown benchmark {args.what!r}")


def _usage_error(problem: str) -> int:
    print(f"specverify: error: {problem}", file=sys.stderr)
    return EXIT_USAGE


def _serve(args: argparse.Namespace) -> int:
    import os

    if not 0 <= args.port <= 65535:
        return _usage_error(f"--port {args.port} is not a TCP port; pass 0..65535 (0 picks a free one)")
    if args.vocab < 2:
        return _usage_error(f"--vocab {args.vocab} is below 2; pass a vocabulary size of at least 2")
    if args.gamma < 1:
        return _usage_error(f"--gamma {args.gamma} is below 1; pass the number of draft tokens per round (>= 1)")
    if args.model_path and not os.path.isdir(args.model_path):
        return _usage_error(
            f"--model-path {args.model_path!r} is not a folder; pass a local model directory (nothing is downloaded)"
        )
    import torch

    from .runners.serve import default_models, make_server, serve_forever

    torch.set_num_threads(1)
    target, draft = default_models(
        model_path=args.model_path, vocab=args.vocab, seed=args.seed, speculative=args.speculative
    )
    try:
        server = make_server(  # type: ignore[no-untyped-call, unused-ignore]  # runners/: untyped until annotated
            target, draft, host=args.host, port=args.port, gamma=args.gamma
        )
    except OSError as exc:
        return _usage_error(
            f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}; pass another --port (0 picks a free one)"
        )
    print(
        f"serving on http://{server.server_address[0]!s}:{server.server_address[1]}/v1/completions "
        f"({'speculative' if draft is not None else 'target-only'})",
        flush=True,
    )
    serve_forever(server)  # type: ignore[no-untyped-call, unused-ignore]  # runners/: untyped until annotated
    return 0


def _conformance(args: argparse.Namespace) -> int:
    from .algorithms.conformance import write_vectors

    path = write_vectors(args.out)
    print(f"wrote {path}")
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse with specverify's usage-error form: one line (no usage dump), exit code 2. Subcommand
    parsers are made of this class too (argparse's default parser_class is the parent's type)."""

    def error(self, message: str) -> NoReturn:
        one_line = message.replace("\n", "\\n")  # a value may carry a newline; the error stays one line
        print(f"specverify: error: {one_line}; see `{self.prog} --help` for the options", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="specverify", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", action="version", version=f"specverify {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)

    b = sub.add_parser("bench", help="benchmarks, printed as ratios against a baseline from the same run")
    b.add_argument("what", choices=["sampler", "stats", "runner", "plan"])
    b.add_argument("--vocab", type=int, action="append", help="vocabulary size (repeatable)")
    b.add_argument("--gamma", type=int, action="append", help="gamma (repeatable)")
    b.add_argument("--batch", type=int, default=1024)
    b.add_argument("--no-torch", action="store_true")
    b.add_argument("--quick", action="store_true", help="fewer simulations (stats)")
    b.add_argument("--seeds", type=int, help="stats: seeds per bug (default 5, --quick 1); the table shows medians")
    b.add_argument(
        "--shape",
        action="append",
        choices=["kernel", "kernel --logits", "round step", "round step --logits"],
        help="plan: the shapes to table (repeatable; default all)",
    )
    b.set_defaults(func=_bench)

    r = sub.add_parser("conformance", help="regenerate the conformance vectors (conformance/)")
    r.add_argument("--out", default="conformance")
    r.set_defaults(func=_conformance)

    sv = sub.add_parser("serve", help="serve a local model on an OpenAI-compatible /v1/completions endpoint")
    sv.add_argument(
        "--port", type=int, default=8000, help="TCP port (default 8000; 0 picks a free one, printed on start)"
    )
    sv.add_argument("--host", default="127.0.0.1")
    sv.add_argument("--speculative", action="store_true", help="decode speculatively with a 2-layer early-exit draft")
    sv.add_argument("--model-path", help="a local model directory (else a seeded tiny Llama)")
    sv.add_argument("--seed", type=int, default=0)
    sv.add_argument("--vocab", type=int, default=256)
    sv.add_argument("--gamma", type=int, default=4)
    sv.set_defaults(func=_serve)

    from .audit.front import cli as audit_cli

    audit_cli.add_commands(sub)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        return _leave(int(args.func(args) or 0), argv)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception:  # noqa: BLE001 - a crash of specverify itself must never read as a FAIL (exit 1)
        import traceback

        traceback.print_exc()
        print(
            "specverify: internal error (a bug in specverify, not a verdict on your implementation); "
            "please report it with the traceback above",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def _leave(code: int, argv: Sequence[str] | None) -> int:
    """The exit code; as a command (not called from Python), exit at once when a call into the
    implementation was abandoned at its timeout: its daemon thread may still be inside native code
    (torch), and interpreter shutdown under it can abort (exit -6 instead of the verdict's code)."""
    if argv is None and any(t.daemon and t.is_alive() for t in threading.enumerate()):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
