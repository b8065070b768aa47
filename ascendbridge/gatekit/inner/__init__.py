"""Scripts the framework runs INSIDE an adaptation's interpreter (torch available, no framework).

They are executed by path (`<adaptation python> ascendbridge/gatekit/inner/<script>.py ...`), import only
torch and the standard library, and load the framework's own comparator by file path, so a
gate's checking code always comes from this repository, never from the adaptation under test.
"""
