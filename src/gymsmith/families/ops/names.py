"""Word lists for generated records. Plain data; all choices from them go through a seeded Random."""

FIRST = ("Ana", "Ben", "Chloe", "Dev", "Elif", "Femi", "Grace", "Hugo", "Ines", "Jon", "Kira", "Luca", "Maya",
         "Nils", "Omar", "Priya", "Quinn", "Rosa", "Sam", "Tara", "Uma", "Victor", "Wen", "Yara", "Zoe", "Aiko",
         "Bruno", "Carla", "Dmitri", "Esme", "Farah", "Gus", "Hana", "Ivo", "Jade", "Kofi", "Lena", "Milo", "Nora")
LAST = ("Silva", "Okafor", "Nguyen", "Schmidt", "Rossi", "Kowalski", "Haddad", "Tanaka", "Murphy", "Dubois",
        "Larsen", "Moreau", "Novak", "Patel", "Quispe", "Reyes", "Sato", "Torres", "Varga", "Weber", "Yilmaz",
        "Zhang", "Andersen", "Brennan", "Costa", "Diaz", "Ekström", "Fischer", "Garcia", "Horvat", "Ito")
PRODUCTS = ("pallet wrap", "label printer", "barcode scanner", "shipping box S", "shipping box M", "shipping box L",
            "packing tape", "bubble mailer", "hand truck", "safety gloves", "box cutter", "thermal labels",
            "void fill", "stretch film", "strapping kit", "tape gun", "cold pack", "poly mailer", "pallet jack",
            "shelf bin", "dock bumper", "floor marker", "scale 30kg", "headset", "hi-vis vest")
SUPPLIERS = ("Northwind Supply", "Acme Packaging", "Globex Logistics", "Initech Wholesale", "Umbrella Goods",
             "Vandelay Imports", "Stark Industrial", "Wayne Materials", "Tyrell Parts", "Cyberdyne Depot",
             "Soylent Trade", "Hooli Distribution", "Pied Piper Freight", "Gringotts Goods", "Oscorp Components")
WAREHOUSES = ("Rotterdam", "Leipzig", "Lyon", "Porto", "Gdansk")
