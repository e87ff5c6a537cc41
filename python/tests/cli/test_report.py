"""``ocf report``: the page of a managed directory opens in headless Chromium
(Debian's chromium and chromium-driver, through selenium) with no console
error and no network, shows its charts (stored bytes by module, a histogram
per tensor, norms and changes over the checkpoints), and draws something:
the screenshot is not blank."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ocf

webdriver = pytest.importorskip("selenium.webdriver")
Image = pytest.importorskip("PIL.Image")


def managed_run(directory: Path, saves: int) -> None:
    """A CheckpointManager's directory: three tensors and the save counter, changing."""
    rng = np.random.default_rng(0)
    weights = {"dense/kernel": ocf.Variable(rng.standard_normal((64, 32)).astype(np.float32)),
               "dense/bias": ocf.Variable(np.zeros(32, np.float32)),
               "head/kernel": ocf.Variable(rng.standard_normal((32, 4)).astype(np.float32))}
    with ocf.CheckpointManager(ocf.Checkpoint(model=weights), directory) as manager:
        for _ in range(saves):
            for variable in weights.values():
                variable.value[...] += rng.standard_normal(variable.value.shape)
            manager.save()


@pytest.fixture
def browser() -> object:
    if shutil.which("chromedriver") is None:
        pytest.fail("chromedriver is missing: scripts/setup_native.sh installs chromium-driver")
    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--host-resolver-rules=MAP * ~NOTFOUND", "--window-size=1400,2000"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = webdriver.ChromeService(executable_path=shutil.which("chromedriver"))
    driver = webdriver.Chrome(options=options, service=service)
    yield driver
    driver.quit()


def test_the_report_of_a_managed_directory_opens_in_chromium_with_its_charts(
        tmp_path: Path, browser: object) -> None:
    managed_run(tmp_path / "run", saves=3)
    page = tmp_path / "report.html"
    done = subprocess.run([sys.executable, "-m", "ocf", "report", str(tmp_path / "run"),
                           "-o", str(page)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text), "a network reference"
    browser.get(page.as_uri())  # type: ignore[attr-defined]
    errors = [entry for entry in browser.get_log("browser")  # type: ignore[attr-defined]
              if entry["level"] in ("SEVERE", "WARNING")]
    assert not errors, errors
    charts = browser.find_elements("css selector", "figure.chart svg")  # type: ignore[attr-defined]
    # sizes; histograms of the 4 numeric tensors (3 weights, save_counter); norms; changes
    assert len(charts) == 1 + 4 + 2
    captions = [c.text for c in browser.find_elements(  # type: ignore[attr-defined]
        "css selector", "figcaption")]
    assert any("change from the previous checkpoint" in c for c in captions), captions
    assert all(chart.size["width"] > 100 and chart.size["height"] > 100 for chart in charts)
    shot = Image.open(io.BytesIO(browser.get_screenshot_as_png()))  # type: ignore[attr-defined]
    colors = shot.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colors is not None
    assert len(colors) > 50, "the screenshot is nearly blank"
    white = max(count for count, rgb in colors if rgb == (255, 255, 255)) \
        if any(rgb == (255, 255, 255) for _, rgb in colors) else 0
    assert white < 0.97 * shot.width * shot.height, "the screenshot is nearly all white"


def test_a_report_of_a_missing_checkpoint_fails_naming_it(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "ocf", "report", str(tmp_path / "nothing"),
                           "-o", str(tmp_path / "r.html")], capture_output=True, text=True,
                          check=False)
    assert done.returncode != 0
    assert "nothing" in done.stderr
    assert not (tmp_path / "r.html").exists()
