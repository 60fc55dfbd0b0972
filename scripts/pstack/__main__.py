"""Command line of the patch-stack tooling: `python -m pstack <command>` (see Makefile)."""

from __future__ import annotations

import argparse
import sys

from .common import Paths, main_wrapper


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="pstack")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("apply", help="(re)create vllm-src: base + patches/series")
    p.add_argument("--force", action="store_true",
                   help="discard unexported commits (kept on a backup branch)")
    sub.add_parser("export", help="write vllm-src's series commits to patches/")
    sub.add_parser("sync", help="apply, unless vllm-src holds unexported work")
    sub.add_parser("check-series", help="apply + export is a no-op; lint the patches")
    p = sub.add_parser("fetch", help="download and verify the pinned base files")
    p.add_argument("what", choices=["sdist", "wheel", "all"], nargs="?", default="all")
    p = sub.add_parser("models", help="generate the tiny local test models")
    p.add_argument("names", nargs="*")
    p = sub.add_parser("wheel", help="build and verify the patched wheels into dist/")
    p.add_argument("which", choices=["cuda", "cpu", "all"], nargs="?", default="all")
    p = sub.add_parser("rebase", help="move the series onto another vLLM release")
    p.add_argument("version", nargs="?")
    p.add_argument("--abort", action="store_true")
    p.add_argument("--report", action="store_true")
    p.add_argument("--scratch")
    p = sub.add_parser("pr", help="upstream PR material for one patch or all")
    p.add_argument("which", nargs="*")
    args = parser.parse_args(argv)
    paths = Paths.default()

    if args.command == "apply":
        from .srctree import apply
        apply(paths, force=args.force)
    elif args.command == "sync":
        from .srctree import sync
        sync(paths)
    elif args.command == "export":
        from .srctree import export
        export(paths)
    elif args.command == "check-series":
        from .check_series import check_series
        check_series(paths)
    elif args.command == "rebase":
        from .rebase import main as rebase_main
        return rebase_main(argv[1:])
    elif args.command == "pr":
        from .pr import main as pr_main
        return pr_main(argv[1:])
    elif args.command == "fetch":
        from .fetch import main as fetch_main
        return fetch_main([args.what])
    elif args.command == "models":
        from .tiny_models import main as models_main
        return models_main(args.names)
    elif args.command == "wheel":
        from .wheels import main as wheel_main
        return wheel_main([args.which])
    return 0


if __name__ == "__main__":
    main_wrapper(main)
    sys.exit(0)
