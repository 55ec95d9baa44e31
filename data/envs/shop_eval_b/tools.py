"""Shop tools. The runtime injects the module global ``db`` (db.query(sql, params))."""


def _one(sql, name, what):
    rows = db.query(sql, (name,))  # noqa: F821
    if not rows:
        raise ValueError("unknown %s %r" % (what, name))
    return rows[0]


def get_product(name: str) -> dict:
    """Get a product by name."""
    return _one("SELECT name, category, price, stock, rating, supplier FROM products"
                " WHERE name = ?", name, "product")


def list_products(category: str) -> list:
    """List the products in a category."""
    rows = db.query("SELECT name, price, stock, rating FROM products WHERE category = ?"  # noqa: F821
                    " ORDER BY name", (category,))
    if not rows:
        raise ValueError("unknown category %r" % (category,))
    return rows


def get_supplier(name: str) -> dict:
    """Get a supplier by name."""
    return _one("SELECT name, city, phone FROM suppliers WHERE name = ?", name, "supplier")
