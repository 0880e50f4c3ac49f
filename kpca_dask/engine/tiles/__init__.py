"""The landmark problem in tiles over the workers, for m beyond one worker's memory: the tiled
pass, the tiled Cholesky factor and products, and the tiled solve."""
