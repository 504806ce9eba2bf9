#!/usr/bin/env python3
"""readme_first.py README OUT: writes the C program of README's section
"A first program" to OUT, unchanged, so the tests run what a new user
copies."""
import re
import sys

text = open(sys.argv[1], encoding="utf-8").read()
at = text.find("## A first program")
if at < 0:
    sys.exit("readme_first: no section 'A first program' in " + sys.argv[1])
m = re.search(r"```c\n(.*?)```", text[at:], re.S)
if m is None:
    sys.exit("readme_first: no ```c block after 'A first program'")
with open(sys.argv[2], "w", encoding="utf-8") as f:
    f.write(m.group(1))
