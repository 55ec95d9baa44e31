answer = {"value": pow(8, 8 ** 36, 10 ** 12)}
