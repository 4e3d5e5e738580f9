#!/usr/bin/env python3
"""Generate the Python code of the gRPC contract: proto/worker/api/v1/*.proto -> worker/api/v1/.

This is the single definition of the code generation. scripts/gen_proto.sh runs it after making
sure the pinned grpcio-tools is installed; tests/unit/project/test_proto_fresh.py runs it into a
temporary directory and compares the result with the committed files.

Usage:
    python scripts/gen_proto.py              regenerate the committed code in worker/api/v1/
    python scripts/gen_proto.py --out DIR    generate into DIR/worker/api/v1/ only
    python scripts/gen_proto.py --print-pin  print the pinned grpcio-tools version
"""

from __future__ import annotations

import argparse
import importlib.metadata
import shutil
import sys
import tempfile
from pathlib import Path

# The generated code depends on this exact version (it embeds the protoc and grpc versions and
# checks them against the runtime at import time). Change it only together with regenerating.
GRPCIO_TOOLS_VERSION = "1.85.1"

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
# Package directory, relative both to PROTO_ROOT (the .proto files) and to the output root.
PACKAGE_DIR = "worker/api/v1"
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")


def proto_files() -> list[str]:
    """The .proto files to compile, as paths relative to PROTO_ROOT, in a fixed order."""
    package = PROTO_ROOT / PACKAGE_DIR
    return sorted(p.relative_to(PROTO_ROOT).as_posix() for p in package.glob("*.proto"))


def is_generated(name: str) -> bool:
    return name.endswith(GENERATED_SUFFIXES)


def generated_files(root: Path) -> dict[str, bytes]:
    """Generated files under root/PACKAGE_DIR, keyed by path relative to root."""
    package = root / PACKAGE_DIR
    if not package.is_dir():
        return {}
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(package.iterdir())
        if p.is_file() and is_generated(p.name)
    }


def check_pin() -> None:
    try:
        installed = importlib.metadata.version("grpcio-tools")
    except importlib.metadata.PackageNotFoundError:
        installed = None
    if installed != GRPCIO_TOOLS_VERSION:
        raise SystemExit(
            f"grpcio-tools {GRPCIO_TOOLS_VERSION} is required to generate the gRPC code "
            f"(found {installed or 'none'}); run scripts/gen_proto.sh, which installs it."
        )


def generate(out_root: Path) -> list[str]:
    """Compile every .proto into out_root/PACKAGE_DIR; return the generated paths (relative)."""
    check_pin()
    from grpc_tools import protoc  # imported late: --print-pin must work without grpc_tools

    files = proto_files()
    if not files:
        raise SystemExit(f"no .proto files under {PROTO_ROOT / PACKAGE_DIR}")
    out_root.mkdir(parents=True, exist_ok=True)
    well_known = Path(protoc.__file__).resolve().parent / "_proto"  # google/protobuf/*.proto
    args = [
        "protoc",
        f"--proto_path={PROTO_ROOT}",
        f"--proto_path={well_known}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        # Paths relative to the proto root: they are what the generated code records.
        *files,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed (see the messages above)")
    return sorted(generated_files(out_root))


def sync(src_root: Path, dst_root: Path) -> None:
    """Make the generated files under dst_root exactly those under src_root."""
    wanted = generated_files(src_root)
    for rel in generated_files(dst_root):
        if rel not in wanted:
            (dst_root / rel).unlink()
            print(f"removed {rel}")
    for rel in wanted:
        target = dst_root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists() or target.read_bytes() != wanted[rel]:
            shutil.copyfile(src_root / rel, target)
            print(f"wrote {rel}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, help="generate into this root instead of the repository"
    )
    parser.add_argument(
        "--print-pin", action="store_true", help="print the pinned grpcio-tools version"
    )
    args = parser.parse_args(argv)
    if args.print_pin:
        print(GRPCIO_TOOLS_VERSION)
        return 0
    if args.out is not None:
        generate(args.out)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        sync(Path(tmp), ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
