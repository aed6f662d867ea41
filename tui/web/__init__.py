"""`specdec-tui serve-web`: the wizard in a browser through textual-serve (the optional `web` extra).

cli.py (the command line and its checks; no textual-serve import), server.py (the aiohttp server: token, one
driver, the app's lifecycle; imports textual-serve), child.py (one browser session's app) and
templates/app_index.html (the page: no request leaves the serving machine). A front end: it may import any
floor of tui/core, and tui/core never imports it.
"""
