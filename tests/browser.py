"""What every page of the product must pass in a real browser, checked where a browser
test has the page in front of it: `page_audit(page, "name")`.

- No JavaScript error: nothing logged as a console error and no uncaught exception since
  the page (the `page` fixture) was opened, except the browser's own line for a refusal
  the page shows in place (400, 403, 409, 422); `allow` names any other a test provokes.
- Accessible: axe-core (tests/vendor/axe.min.js, injected into the page) finds no
  violation of serious or critical impact, at each width (on a phone tables scroll
  sideways and the layout is another).
- Usable at 1280 px and at 390 px: no horizontal scrolling at either width, so nothing
  is cut off on a phone.
- Photographed at each width into $LECTERN_SCREENSHOTS (default var/screenshots, where
  `make screenshots` leaves them; docs/screenshots/ keeps a curated few) for a person to look at.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
AXE = Path(__file__).parent / "vendor" / "axe.min.js"
WIDTHS = (1280, 390)
SERIOUS = ("serious", "critical")
CONSOLE_ERRORS = "_lectern_console_errors"
# The browser logs every 4xx answer as a console error; a refusal the page shows in
# place (400, 403, 409, 422) is the product working, not a script failing.
REFUSED = r"^Failed to load resource: the server responded with a status of 4(00|03|09|22) "


def console_watch(page: Any) -> list[str]:
    """Collect the page's console errors and uncaught exceptions from now on (the `page`
    fixture calls it before the first navigation)."""
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(f"uncaught: {error}"))
    setattr(page, CONSOLE_ERRORS, errors)
    return errors


def sign_in(page: Any, base_url: str, username: str, password: str, next_path: str) -> None:
    """Sign in on the sign-in page as a person would, and wait to land on `next_path`."""
    page.goto(f"{base_url}/accounts/login/?next={next_path}")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button:has-text('Sign in')")
    page.wait_for_url(re.compile(re.escape(base_url + next_path.split("?")[0])))


# htmx marks what it is fetching, swapping and settling; new content is htmx-added until
# it settles (20 ms later, or more on a busy machine), and only then does htmx listen to
# it: a key pressed on a control before that changes the control and nothing else.
HTMX_BUSY = ".htmx-request, .htmx-swapping, .htmx-settling, .htmx-added"


def htmx_settled(page: Any) -> None:
    """Wait until no htmx request, swap or settle is under way on the page."""
    wait_until(page, f"() => document.querySelector({HTMX_BUSY!r}) === null")


def wait_until(page: Any, predicate: str, *, timeout_ms: int = 15_000) -> None:
    """Wait until the JavaScript function `predicate` holds on the page, checked at each
    animation frame; fail after `timeout_ms`. Page.wait_for_function would do it, but it
    evaluates its predicate as a string inside the page, which the pages' policy refuses
    (no 'unsafe-eval'); this is compiled by the browser's debugging protocol instead."""
    page.evaluate(f"""async () => {{
        const holds = {predicate};
        const deadline = performance.now() + {timeout_ms};
        while (!holds()) {{
            if (performance.now() > deadline) {{ throw new Error({json.dumps("never held: " + predicate)}); }}
            await new Promise((resolve) => requestAnimationFrame(resolve));
        }}
    }}""")


def tab_to(page: Any, selector: str, *, limit: int = 80) -> None:
    """Press Tab until the focus is on an element `selector` (a Playwright selector)
    matches (keyboard use), once htmx has settled (keys pressed before would be lost);
    fails after `limit` presses."""
    htmx_settled(page)
    targets = page.locator(selector)
    for _ in range(limit):
        page.keyboard.press("Tab")
        if targets.evaluate_all("(elements) => elements.includes(document.activeElement)"):
            return
    raise AssertionError(f"Tab never reached {selector}")


def screenshots_dir() -> Path:
    folder = Path(os.environ.get("LECTERN_SCREENSHOTS", ROOT / "var" / "screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def axe_violations(page: Any) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the page as it is now."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        # Evaluated by the browser's debugging protocol, as the test's own code: a <script>
        # tag (add_script_tag) is inline script, which the pages' policy refuses.
        page.evaluate(AXE.read_text(encoding="utf-8"))
    results = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    return [violation for violation in results["violations"] if violation["impact"] in SERIOUS]


def _widest(page: Any) -> str:
    """The outermost elements wider than the window, to name in a failure."""
    return str(page.evaluate("""() => [...document.querySelectorAll('body *')]
        .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1
                     && e.parentElement.getBoundingClientRect().right <= window.innerWidth + 1)
        .slice(0, 5).map(e => e.tagName.toLowerCase() + (e.className ? '.' + e.className : ''))"""))


def _describe(violations: list[dict[str, Any]]) -> str:
    lines = []
    for violation in violations:
        targets = [" ".join(node["target"]) for node in violation["nodes"][:3]]
        lines.append(f"{violation['id']} ({violation['impact']}): {violation['help']} at {targets}")
    return "\n".join(lines)


def page_audit(page: Any, name: str, *, widths: Iterable[int] = WIDTHS, allow: Iterable[str] = ()) -> None:
    """Check the page as it stands (see the module docstring); `allow`: regular
    expressions of console errors the test provoked on purpose."""
    errors = [error for error in getattr(page, CONSOLE_ERRORS, [])
              if not any(re.search(pattern, error) for pattern in (REFUSED, *allow))]
    assert not errors, f"{name}: console errors: {errors}"
    original = page.viewport_size
    try:
        for width in widths:
            page.set_viewport_size({"width": width, "height": original["height"] if original else 900})
            violations = axe_violations(page)
            assert not violations, f"{name} at {width} px: accessibility violations:\n{_describe(violations)}"
            # caret="initial": hiding the caret adds a <style> element, which the pages' policy refuses
            page.screenshot(path=str(screenshots_dir() / f"{name}-{width}.png"), full_page=True, caret="initial")
            overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 1, f"{name}: {overflow} px wider than the {width} px window ({_widest(page)})"
    finally:
        if original:
            page.set_viewport_size(original)
