"""Print numbered lines at NOISY_RATE lines/s (default 2000), flushed in small batches."""

import os
import sys
import time

rate = float(os.environ.get("NOISY_RATE", "2000"))
batch = max(1, int(rate / 100))  # 100 flushes a second keeps the rate smooth
start = time.monotonic()
n = 0
while True:
    for _ in range(batch):
        n += 1
        sys.stdout.write(f"noisy line {n}\n")
    sys.stdout.flush()
    delay = start + n / rate - time.monotonic()
    if delay > 0:
        time.sleep(delay)
