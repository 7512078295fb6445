"""The `browser` toolset: a headless Chromium driven over the Chrome DevTools Protocol."""
