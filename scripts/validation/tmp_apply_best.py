"""(temporary, not committed) Write a sweep's best config per shape into a copy of triton_nvfp4.py."""
import json
import re
import sys

sweep, path = sys.argv[1], sys.argv[2]
src = open(path).read()
for b in json.load(open(sweep))["best"]:
    s = b["shape"]
    key = f"({s['m']}, {s['n']}, {s['k']})"
    cfg = list(b["config"])
    name = {2: "FP8", 3: "INT8", 4: "I8G"}[cfg[6]]
    line = f"    {key}: ({', '.join(map(str, cfg[:6]))}, {name}),"
    src, n = re.subn(rf"^    {re.escape(key)}: \(.*\),$", line, src, flags=re.M)
    assert n == 1, key
    print(line)
open(path, "w").write(src)
