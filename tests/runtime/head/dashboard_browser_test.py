"""The head's dashboard as a person sees it, in headless Chromium (ctest dashboard_browser_test).

A real skyrl-head (--dashboard-port) and two real skyrl-workers; a short GRPO job submitted with
`skyrl job submit`; a Python actor whose process is SIGKILLed. The browser signs in through the
login form and reads the pages: both nodes alive, the actors with their states, the killed
actor's death reason, the job's reward plot with a point per step. Screenshots of every page
go to $SKYRL_ARTIFACTS_DIR (ctest sets build/test-artifacts/dashboard). Without the token the
browser gets the login page and the API 401, never data.

Skips, saying why, only when Chromium, chromedriver or selenium is missing (scripts/install-deps
installs them: chromium, chromium-driver, python3-selenium).
"""

import os
import shutil
import subprocess
import tempfile
import urllib.parse

import pytest

from cluster_fixture import BIN, ROOT, Cluster, wait_for
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
STEPS = 4

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError as e:  # pragma: no cover - the skip says why
    webdriver = None
    SELENIUM_ERROR = str(e)


@pytest.fixture
def cluster():
    if not os.access(os.path.join(BIN, "skyrl-head"), os.X_OK):
        pytest.fail(f"no skyrl-head in SKYRL_BIN_DIR={BIN!r}")
    base = tempfile.mkdtemp(prefix="skyrl-dash-")
    c = Cluster(base)
    try:
        yield c
    finally:
        c.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def browser():
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if webdriver is None:
        pytest.skip(f"selenium is not importable ({SELENIUM_ERROR}); scripts/install-deps installs python3-selenium")
    if missing:
        pytest.skip(f"{' and '.join(missing)} missing; scripts/install-deps installs chromium and chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="skyrl-chromium-")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--window-size=1400,1000", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def artifacts():
    d = os.environ.get("SKYRL_ARTIFACTS_DIR") or os.path.join(tempfile.gettempdir(), "skyrl-dashboard-artifacts")
    os.makedirs(d, exist_ok=True)
    return d


def show(driver, page):
    """Opens #page and waits until the script has drawn it from the API."""
    driver.execute_script("location.hash = arguments[0]", page)
    WebDriverWait(driver, 20).until(
        lambda d: d.find_element(By.ID, "page").get_attribute("data-ready") == page)


def table_rows(driver, css, key):
    """The rows matching `css` as {row[key]: {"state": data-state, "text": ..., "cells": [...]}},
    read in one script run: the page redraws as it polls, so elements found one call ago may be
    gone by the next."""
    return driver.execute_script("""
        const out = {};
        for (const r of document.querySelectorAll(arguments[0]))
          out[r.getAttribute(arguments[1])] = {state: r.getAttribute("data-state"), text: r.innerText,
                                               cells: [...r.querySelectorAll("td")].map(td => td.innerText)};
        return out;""", css, key)


def screenshot(driver, name):
    path = os.path.join(artifacts(), f"{name}.png")
    driver.save_screenshot(path)
    return path


def kill_a_python_actor(cluster):
    """Creates a Python actor through the SDK and SIGKILLs its process; returns its id."""
    code = (
        "import os, signal, skyrl_runtime as ray\n"
        "ray.init()\n"
        "@ray.remote\n"
        "class Victim:\n"
        "    def __init__(self):\n"
        "        print('victim ready to be killed', flush=True)\n"
        "    def pid(self):\n"
        "        return os.getpid()\n"
        # Detached: a driver's own actors die with it, and this one must die of the SIGKILL.
        "v = Victim.options(name='victim', lifetime='detached').remote()\n"
        "os.kill(ray.get(v.pid.remote(), timeout=60), signal.SIGKILL)\n"
        "print(v._actor_id)\n")
    run = subprocess.run(["/usr/bin/python3", "-c", code], env=cluster.env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout.strip().splitlines()[-1]


def test_a_person_sees_the_cluster_its_actors_and_the_jobs_plots(cluster, browser, tmp_path):
    # Before signing in: the login page in the browser, 401 from the API, no data anywhere.
    browser.get(cluster.url + "/#actors")
    WebDriverWait(browser, 20).until(lambda d: d.find_elements(By.ID, "token"))
    assert urllib.parse.urlparse(browser.current_url).path == "/login"
    screenshot(browser, "0-login")
    browser.get(cluster.url + "/api/nodes")
    assert "node_id" not in browser.page_source
    assert cluster.status("/api/actors") == 401 and cluster.status("/") == 303

    job = cluster.cli("job", "submit", "--submission-id", "dash-grpo", "--no-wait", "--",
                      os.path.join(BIN, "skyrl-grpo"), "--config",
                      os.path.join(ROOT, "examples", "grpo_copy_distributed.yaml"), "--steps", str(STEPS),
                      "--output-dir", str(tmp_path / "grpo-out"))
    assert job.returncode == 0, job.stdout + job.stderr
    victim = kill_a_python_actor(cluster)

    # A wrong token is refused on the form; the right one signs in and lands on the cluster page.
    browser.get(cluster.url + "/login")
    browser.find_element(By.ID, "token").send_keys("not-the-token-at-all")
    browser.find_element(By.ID, "sign-in").click()
    WebDriverWait(browser, 10).until(lambda d: d.find_elements(By.ID, "error"))
    assert "Wrong token" in browser.find_element(By.ID, "error").text
    browser.find_element(By.ID, "token").send_keys(cluster.token)
    browser.find_element(By.ID, "sign-in").click()
    WebDriverWait(browser, 20).until(lambda d: d.find_element(By.ID, "page").get_attribute("data-ready") == "cluster")

    nodes = cluster.api("/api/nodes")
    rows = table_rows(browser, "#nodes tr[data-node]", "data-node")
    assert sorted(rows) == sorted(n["node_id"] for n in nodes)
    assert [r["state"] for r in rows.values()] == ["ALIVE", "ALIVE"]
    text = browser.find_element(By.ID, "nodes").text
    assert "2 alive" in browser.find_element(By.TAG_NAME, "h2").text
    assert "name=worker-1" in text and "name=worker-2" in text and "CPU" in text
    screenshot(browser, "1-cluster")

    # The job runs to the end; its page plots a point per step.
    wait_for("the GRPO job to succeed", lambda: cluster.api("/api/jobs/dash-grpo")["state"] == "SUCCEEDED",
             timeout=240, period=0.5)
    show(browser, "jobs")
    assert browser.find_element(By.CSS_SELECTOR, "tr[data-job='dash-grpo']").text.count("SUCCEEDED") == 1
    browser.find_element(By.LINK_TEXT, "dash-grpo").click()
    WebDriverWait(browser, 20).until(
        lambda d: d.find_element(By.ID, "page").get_attribute("data-ready") == "job/dash-grpo")
    points = browser.find_elements(By.CSS_SELECTOR, "#reward-plot circle[data-series='mean reward']")
    assert len(points) == STEPS
    assert len(browser.find_elements(By.CSS_SELECTOR, "#kl-plot circle")) == STEPS
    assert browser.find_elements(By.CSS_SELECTOR, "#phase-plot rect[data-phase='generate']")
    assert browser.find_elements(By.CSS_SELECTOR, "#phase-plot rect[data-phase='train']")
    assert f"step {STEPS}: reward" in browser.find_element(By.ID, "job-summary").text
    assert "skyrl-grpo" in browser.find_element(By.ID, "job-log").text
    screenshot(browser, "2-job")

    # Actors: the job's roles with their states, and the killed actor's death reason.
    wait_for("the killed actor to be DEAD", lambda: any(
        a["actor_id"] == victim and a["state"] == "DEAD" for a in cluster.api("/api/actors")), timeout=30)
    before = {a["actor_id"]: a["state"] for a in cluster.api("/api/actors")}
    show(browser, "actors")
    after = {a["actor_id"]: a["state"] for a in cluster.api("/api/actors")}
    rows = table_rows(browser, "#actors tr[data-actor]", "data-actor")
    assert victim in rows, f"{victim} not among {list(rows)}"
    assert rows[victim]["state"] == "DEAD"
    assert "killed by signal 9" in rows[victim]["text"], rows[victim]["text"]
    assert "default/victim" in rows[victim]["text"]
    classes = {r["cells"][1] for r in rows.values()}
    assert len(classes) >= 5, f"the job's trainer, engine, reward and reference, and the victim: {classes}"
    # Every actor with the state the head had while the page was drawn (ones that changed state
    # meanwhile, e.g. the job's roles being stopped, may show either).
    assert set(rows) == set(after)
    for actor, row in rows.items():
        assert row["state"] in {before.get(actor), after[actor]}, (actor, row["text"])
    screenshot(browser, "3-actors")

    # Its page: the reason again, and the end of its log, fetched from its worker.
    browser.find_element(By.LINK_TEXT, victim).click()
    WebDriverWait(browser, 20).until(
        lambda d: d.find_element(By.ID, "page").get_attribute("data-ready") == f"actor/{victim}")
    assert "killed by signal 9" in browser.find_element(By.ID, "actor").text
    assert "victim ready to be killed" in browser.find_element(By.ID, "actor-log").text
    screenshot(browser, "3-actor")

    show(browser, "groups")
    screenshot(browser, "4-groups")

    # Signing out ends the session: the API answers 401 again and the page is the login form.
    browser.find_element(By.CSS_SELECTOR, "header form button").click()
    WebDriverWait(browser, 10).until(lambda d: d.find_elements(By.ID, "token"))
    browser.get(cluster.url + "/api/actors")
    assert victim not in browser.page_source
