"""Long steps log what they do and how far they are (before: 0-byte logs for minutes)."""
import io
import logging
import sys

from bugimpact.progress import copy_logged, run_logged


def test_a_long_command_logs_its_output_time_and_bytes(tmp_path, caplog):
    script = ("import pathlib, time\nprint('Collecting torch==1.5.1', flush=True)\n"
              f"pathlib.Path({str(tmp_path)!r}, 'part').write_bytes(b'x' * 3_000_000)\n"
              "time.sleep(0.5)\nprint('Saved torch.whl', flush=True)\n")
    with caplog.at_level(logging.INFO, logger="bugimpact"):
        code, output = run_logged([sys.executable, "-c", script], "download torch", watch=tmp_path,
                                  every=0.1)
    said = [r.getMessage() for r in caplog.records]
    assert code == 0 and "Saved torch.whl" in output
    assert "download torch: Collecting torch==1.5.1" in said
    assert any(m.startswith("download torch: ") and "3 MB so far" in m for m in said)
    assert said[-1].startswith("download torch: exit 0 after ") and said[-1].endswith(", 3 MB")


def test_a_copied_download_says_its_size(caplog):
    out = io.BytesIO()
    with caplog.at_level(logging.INFO, logger="bugimpact"):
        copy_logged(io.BytesIO(b"y" * 2_500_000), out, "download w.whl", every=0.0, chunk=1 << 20)
    assert out.getvalue() == b"y" * 2_500_000
    assert caplog.records[-1].getMessage().startswith("download w.whl: 2 MB in ")
