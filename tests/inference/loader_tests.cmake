# tests of the inference loader area
