# tests of the server service area
