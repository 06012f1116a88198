"""Run the example notebooks top to bottom in a fresh kernel and store small, stable outputs.

CI checks the notebooks with nbval (``python -m pytest``): the cells marked
``# NBVAL_CHECK_OUTPUT`` must print what the committed notebook shows. When a change to the
toolkit rightly changes one of those figures, rerun this script and review the diff::

    python notebooks/refresh_outputs.py                # all notebooks
    python notebooks/refresh_outputs.py notebooks/02_tiles_tolerance_quota.ipynb

Each notebook is executed in its own folder with the current Python, like nbval does. What is
kept, so that committed notebooks stay small and their diffs readable:

- text outputs (``text/plain``, ``text/html``, streams, errors);
- not widgets (maps, progress bars: their state is not stored either), nor images;
- no ``metadata.widgets`` and no execution timing.

Only ``jupyter_client``, ``ipykernel`` and ``nbformat`` are needed (all installed with the
test extras); nbconvert is not.
"""

# mypy: disable-error-code="no-untyped-call"
# (nbformat has no type hints)

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import nbformat
from jupyter_client.manager import KernelManager
from nbval.kernel import CURRENT_ENV_KERNEL_NAME, NbvalKernelspecManager

HERE = Path(__file__).resolve().parent
#: Output MIME types kept; anything else (widget views, images, JavaScript) is dropped.
KEEP_MIME = ("text/plain", "text/html")
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
CELL_TIMEOUT = 120.0


def _keep(output: dict[str, Any]) -> dict[str, Any] | None:
    """The output stripped to its text, or None when nothing worth keeping remains."""
    if output["output_type"] in ("display_data", "execute_result"):
        data = output.get("data", {})
        if WIDGET_MIME in data:
            return None  # a map or a progress bar: its text/plain is just a widget repr
        kept = {k: v for k, v in data.items() if k in KEEP_MIME}
        if not kept:
            return None
        output["data"] = kept
        output["metadata"] = {}
    return output


def execute(path: Path) -> float:
    """Execute one notebook in place; returns the seconds it took."""
    notebook = nbformat.read(path, as_version=4)
    manager = KernelManager(
        kernel_name=CURRENT_ENV_KERNEL_NAME, kernel_spec_manager=NbvalKernelspecManager()
    )
    manager.start_kernel(cwd=str(path.parent))
    client = manager.client()
    client.start_channels()
    started = time.perf_counter()
    try:
        client.wait_for_ready(timeout=60)
        count = 0
        for cell in notebook.cells:
            if cell.cell_type != "code":
                continue
            cell.metadata.pop("execution", None)
            outputs: list[dict[str, Any]] = []

            def hook(msg: dict[str, Any], outputs: list[dict[str, Any]] = outputs) -> None:
                kind = msg["msg_type"]
                if kind == "clear_output":
                    outputs.clear()
                elif kind in ("stream", "display_data", "execute_result", "error"):
                    outputs.append(nbformat.v4.output_from_msg(msg))

            reply = client.execute_interactive(
                cell.source, output_hook=hook, timeout=CELL_TIMEOUT, allow_stdin=False
            )
            count += 1
            cell.execution_count = count
            cell.outputs = [o for o in (_keep(dict(o)) for o in outputs) if o is not None]
            cell.outputs = [nbformat.from_dict(o) for o in _merge_streams(cell.outputs)]
            for output in cell.outputs:
                if "execution_count" in output:
                    output["execution_count"] = count
            if reply["content"]["status"] != "ok":
                raise RuntimeError(
                    f"{path.name}: cell {count} failed:\n{cell.source}\n"
                    + "\n".join(reply["content"].get("traceback", []))
                )
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    elapsed = time.perf_counter() - started
    notebook.metadata.pop("widgets", None)
    nbformat.validate(notebook)
    nbformat.write(notebook, path)
    return elapsed


def _merge_streams(outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Join consecutive stream chunks of the same name (as Jupyter shows them)."""
    merged: list[dict[str, Any]] = []
    for output in outputs:
        last = merged[-1] if merged else None
        if (
            output["output_type"] == "stream"
            and last is not None
            and last["output_type"] == "stream"
            and last["name"] == output["name"]
        ):
            last["text"] += output["text"]
        else:
            merged.append(output)
    return merged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        default=sorted(HERE.glob("[0-9][0-9]_*.ipynb")))
    args = parser.parse_args(argv)
    for path in args.notebooks:
        seconds = execute(path.resolve())
        print(f"{path}: executed in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
