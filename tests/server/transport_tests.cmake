# tests of the server transport area
