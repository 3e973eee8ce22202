"""Headless Chromium (Debian's `chromium` and `chromium-driver`) driven by Selenium, for the portal's tests and
screenshots. The machine's network is closed: Chromium starts with everything that would call out turned off,
and a fresh profile each time."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
INSTALL = "apt-get install -y --no-install-recommends chromium chromium-driver"  # what make test / CI run
DESKTOP = (1280, 800)
PHONE = (390, 844)
WAIT_SECONDS = 30.0

CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",  # root in a container has no user namespace for the sandbox
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
)


def missing() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not path.exists():
            return f"{path} is not installed (Debian: {INSTALL}; `make browser` installs it when it can)"
    return None


class Browser:
    """One Chromium window, with waits for what the portal draws."""

    def __init__(self, driver: webdriver.Chrome) -> None:
        self.driver = driver

    def size(self, width_height: tuple[int, int]) -> None:
        self.driver.set_window_size(*width_height)

    def open(self, url: str) -> None:
        self.driver.get(url)

    def wait(self, css: str, timeout: float = WAIT_SECONDS) -> WebElement:
        located = expected_conditions.visibility_of_element_located((By.CSS_SELECTOR, css))
        element: WebElement = WebDriverWait(self.driver, timeout).until(located)
        return element

    def wait_text(self, css: str, text: str, timeout: float = WAIT_SECONDS) -> WebElement:
        present = expected_conditions.text_to_be_present_in_element((By.CSS_SELECTOR, css), text)
        WebDriverWait(self.driver, timeout).until(present)
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def all(self, css: str) -> list[WebElement]:
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def click(self, css: str) -> None:
        self.wait(css).click()

    def button(self, label: str, within: WebElement | None = None) -> WebElement:
        scope = within or self.driver
        [found] = [b for b in scope.find_elements(By.TAG_NAME, "button") if b.text == label and b.is_displayed()]
        return found

    def alert_open(self) -> bool:
        try:
            self.driver.switch_to.alert  # noqa: B018 - raises when no alert is open
        except NoAlertPresentException:
            return False
        return True

    def console(self) -> list[str]:
        return [entry["message"] for entry in self.driver.get_log("browser")]

    def screenshot(self, path: Path, viewport: tuple[int, int]) -> None:
        """The page as laid out at the viewport's width, down to twice the viewport's height at most."""
        self.size(viewport)
        height = int(self.driver.execute_script("return document.documentElement.scrollHeight"))
        self.size((viewport[0], min(max(height, viewport[1] // 2), 2 * viewport[1])))
        self.driver.save_screenshot(str(path))


@contextmanager
def chromium() -> Iterator[Browser]:
    profile = tempfile.mkdtemp(prefix="hookrelay-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={DESKTOP[0]},{DESKTOP[1]}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield Browser(driver)
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
