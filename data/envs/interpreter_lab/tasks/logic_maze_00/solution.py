from collections import deque

with open("maze_a.txt") as f:
    grid = f.read().split()
start = [(r, c) for r, line in enumerate(grid) for c, ch in enumerate(line) if ch == "S"][0]
dist = {start: 0}
queue = deque([start])
while queue:
    r, c = queue.popleft()
    if grid[r][c] == "E":
        answer = {"value": dist[r, c]}
        break
    for nxt in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
        if grid[nxt[0]][nxt[1]] != "#" and nxt not in dist:
            dist[nxt] = dist[r, c] + 1
            queue.append(nxt)
