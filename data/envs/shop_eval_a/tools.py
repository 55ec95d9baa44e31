"""Shop tools. The runtime injects the module global ``db`` (db.query(sql, params))."""


PRODUCT_FIELDS = ("name", "category", "price", "stock", "rating", "supplier")
SUPPLIER_FIELDS = ("name", "city", "phone")


def _one(table, fields, name, select, what):
    """The row named `name`: every field, or {select: value} when a field is selected."""
    if select and select not in fields:
        raise ValueError("unknown field %r; one of %s" % (select, ", ".join(fields)))
    columns = select or ", ".join(fields)
    rows = db.query("SELECT %s FROM %s WHERE name = ?" % (columns, table), (name,))  # noqa: F821
    if not rows:
        raise ValueError("unknown %s %r" % (what, name))
    return rows[0]


def get_product(name: str, select: str = "") -> dict:
    """Get a product by name; with select, only that field."""
    return _one("products", PRODUCT_FIELDS, name, select, "product")


def list_products(category: str) -> list:
    """List a category's products, most expensive first; title is the product's name."""
    rows = db.query("SELECT name AS title, price, stock, rating FROM products"  # noqa: F821
                    " WHERE category = ? ORDER BY price DESC, name", (category,))
    if not rows:
        raise ValueError("unknown category %r" % (category,))
    return rows


def get_supplier_by_name(name: str, select: str = "") -> dict:
    """Get a supplier by name; with select, only that field."""
    return _one("suppliers", SUPPLIER_FIELDS, name, select, "supplier")
