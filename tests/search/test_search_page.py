"""The search page in a real headless Chromium (Debian's `chromium` + `chromium-driver`, driven by Selenium):
type a query, see three result lists side by side. Skipped outside CI when the browser is missing; CI fails."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from samples.tiny_bert import tiny_bert
from samples.wiki_docs import wiki_documents, write_jsonl
from tests.helpers.shared_data import in_ci

pytestmark = pytest.mark.usefixtures("one_thread")
CHROMIUM = ("/usr/bin/chromium", "/usr/bin/chromedriver")  # .ci/run installs them with apt-get for the soak tier


def require_browser() -> None:
    missing = [p for p in CHROMIUM if not Path(p).exists()]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (pip, the test extra)")
    if missing:
        message = f"headless browser not installed: {', '.join(missing)}"
        if in_ci():
            pytest.fail(f"{message} (CI: .ci/run installs chromium with GUR_CI_SOAK=1)", pytrace=False)
        pytest.skip(message)


@pytest.fixture()
def page_root(tmp_path) -> tuple[Path, list[dict]]:
    """A corpus embedded with a tiny champion; the page adds MiniLM (its start model) and BM25."""
    from storage.catalog import refresh_catalog
    from storage.champion import set_champion
    from tasks.embed.model_choice import choose_model
    from tasks.embed.outputs import set_active
    from tasks.embed.task import embed_stage
    from tasks.embed.vectors import EmbedConfig
    from tasks.ingest.documents import IngestConfig
    from tasks.ingest.task import ingest

    docs = wiki_documents(20, sentences=3)
    corpus, root = tmp_path / "corpus", tmp_path / "root"
    corpus.mkdir()
    write_jsonl(corpus / "a.jsonl", docs)
    documents = ingest.fn(str(corpus), IngestConfig(source_name="wiki"), str(root), workers=1)
    champion = tiny_bert(tmp_path / "champion", [d["title"] + " " + d["text"] for d in docs])
    set_champion(root, {"export": str(champion), "method": "manual", "metrics": {}})
    chosen = choose_model(root, None)
    ref, _ = embed_stage(documents, EmbedConfig(chosen.fingerprint, chosen.path), root)
    set_active(root, ref, {"model": chosen.fingerprint, "model_path": chosen.path, "spec": chosen.spec})
    refresh_catalog(root)
    return root, docs


def test_the_first_column_says_champion_only_while_it_is(page_root, tmp_path):
    """A champion changed by hand while search keeps the old model's embeddings: its column says `in use`."""
    from storage.champion import set_champion
    from tasks.embed.page import SearchPage

    root, docs = page_root
    page = SearchPage.open(root, k=3)
    assert [column["label"] for column in page.results("Algeria")] == ["champion", "start model", "BM25"]
    other = tiny_bert(tmp_path / "other", [d["title"] for d in docs])
    set_champion(root, {"export": str(other), "method": "manual", "metrics": {}})
    assert [column["label"] for column in page.results("Algeria")] == ["in use", "start model", "BM25"]


@pytest.mark.soak  # CI installs Chromium only for the soak tier (.ci/run, GUR_CI_SOAK=1)
def test_a_query_shows_three_lists_side_by_side(page_root):
    require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    from tasks.embed.page import SearchPage, make_server

    root, docs = page_root
    page = SearchPage.open(root, k=5)
    assert [label for label, *_ in page.columns] == ["champion", "start model", "BM25"]
    server = make_server(page, 0)
    host, port = server.server_address[:2]
    assert host == "127.0.0.1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM[0]
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(arg)
    profile = root.parent / "chromium-profile"
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(service=Service(CHROMIUM[1]), options=options)
    try:
        driver.set_page_load_timeout(60)
        driver.get(f"http://{host}:{port}/")
        box = driver.find_element(By.ID, "q")
        box.send_keys("Algeria Algiers capital")
        driver.find_element(By.ID, "go").click()
        WebDriverWait(driver, 120).until(ec.presence_of_element_located((By.ID, "column-2")))
        columns = driver.find_elements(By.CSS_SELECTOR, ".column")
        assert [c.get_attribute("data-label") for c in columns] == ["champion", "start model", "BM25"]
        hits = [len(c.find_elements(By.CSS_SELECTOR, "li.hit")) for c in columns]
        assert hits[:2] == [5, 5] and 1 <= hits[2] <= 5  # BM25 lists only documents sharing a query word
        bm25_first = columns[2].find_element(By.CSS_SELECTOR, "li.hit b").text
        assert bm25_first == "Algeria"
        minilm_first = columns[1].find_element(By.CSS_SELECTOR, "li.hit b").text
        assert minilm_first == "Algeria"
        tops = [c.location for c in columns]  # side by side: one row, left to right
        assert tops[0]["y"] == tops[1]["y"] == tops[2]["y"] and tops[0]["x"] < tops[1]["x"] < tops[2]["x"]
        assert driver.find_element(By.ID, "q").get_attribute("value") == "Algeria Algiers capital"
        driver.get(f"http://{host}:{port}/?q=%20%20")  # an empty query: the form alone, no error, no lists
        assert not driver.find_elements(By.CSS_SELECTOR, ".column")
        driver.save_screenshot(str(root.parent / "page.png"))
    finally:
        driver.quit()
        server.shutdown()
        server.server_close()
        shutil.rmtree(profile, ignore_errors=True)
