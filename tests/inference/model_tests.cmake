# tests of the inference model area
