from collections import deque

with open("maze_b.txt") as f:
    grid = f.read().split()
start = [(r, c) for r, line in enumerate(grid) for c, ch in enumerate(line) if ch == "S"][0]
dist = {(start, False): 0}
queue = deque([(start, False)])
while queue:
    state = queue.popleft()
    (r, c), key = state
    if grid[r][c] == "E":
        answer = {"value": dist[state]}
        break
    for nr, nc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
        ch = grid[nr][nc]
        if ch == "#" or (ch == "D" and not key):
            continue
        nxt = ((nr, nc), key or ch == "K")
        if nxt not in dist:
            dist[nxt] = dist[state] + 1
            queue.append(nxt)
