"""The words the catalog generator writes products from: WebShop's five categories.

Each :class:`ProductType` is one kind of thing a shop sells (a deodorant stick, a
throw pillow cover), with the Amazon-style category path (``›``-separated), the
search query WebShop would have scraped it under, the attribute phrases its products
may have (WebShop's ``instruction_attributes`` vocabulary), and its option groups.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProductType:
    category: str
    noun: str
    query: str
    path: str
    descriptors: tuple[str, ...]
    attributes: tuple[str, ...]
    options: dict[str, tuple[str, ...]]
    price_range: tuple[float, float]


def _t(
    category: str,
    noun: str,
    query: str,
    path: str,
    descriptors: str,
    attributes: str,
    options: dict[str, str],
    price_range: tuple[float, float],
) -> ProductType:
    return ProductType(
        category=category,
        noun=noun,
        query=query,
        path=path,
        descriptors=tuple(descriptors.split("|")),
        attributes=tuple(attributes.split("|")),
        options={group: tuple(values.split("|")) for group, values in options.items()},
        price_range=price_range,
    )


_BEAUTY_SIZES = "1 fl oz|1.7 fl oz|2 fl oz|3.4 fl oz|4 fl oz|6.7 fl oz|8 fl oz|16 fl oz"
_SCENTS = "lavender|unscented|citrus|coconut|vanilla|eucalyptus mint|rose|sandalwood|fresh linen"
_FLAVORS = (
    "original|dark chocolate|sea salt|honey|cinnamon|peanut butter|strawberry|matcha|"
    "salted caramel|mixed berry"
)
_PACKS = "pack of 1|pack of 2|pack of 3|pack of 4|pack of 6|pack of 12|pack of 24"
_COLORS = (
    "black|white|navy blue|heather grey|olive green|burgundy|light pink|royal blue|beige|"
    "charcoal|teal|mustard yellow|lavender purple|brown"
)
_CLOTHING_SIZES = "x-small|small|medium|large|x-large|xx-large|3x-large"
_SHOE_SIZES = "6|6.5|7|7.5|8|8.5|9|9.5|10|10.5|11|12"
_FURNITURE_COLORS = "espresso|walnut|natural oak|white wash|gray|black|cherry|rustic brown"
_DEVICE_COLORS = "black|white|silver|space gray|blue|red|rose gold|green"

_BEAUTY_COMMON = "paraben free|cruelty free|long lasting|travel size|natural ingredients|vegan"
_FOOD_COMMON = "gluten free|non gmo|certified organic|kosher|plant based"
_CLOTHING_COMMON = "machine wash|soft material|breathable fabric|quick drying|moisture wicking"
_FURNITURE_COMMON = "easy assembly|space saving|living room|heavy duty|mid century|easy clean"
_TEXTILE_COMMON = "machine washable|soft material|living room|bedroom|easy clean|wrinkle free"
_ELECTRONICS_COMMON = "easy install|plug and play|carrying case|compact design"

BEAUTY = "Beauty & Personal Care"
FOOD = "Grocery & Gourmet Food"
FASHION = "Clothing, Shoes & Jewelry"
FURNITURE = "Home & Kitchen"
ELECTRONICS = "Electronics"

PRODUCT_TYPES: tuple[ProductType, ...] = (
    _t(
        "beauty",
        "deodorant stick",
        "natural deodorant",
        f"{BEAUTY} › Personal Care › Deodorants & Antiperspirants › Deodorant",
        "Natural|Aluminum Free|Clinical Strength|Fresh|Organic",
        _BEAUTY_COMMON + "|aluminum free|baking soda free|sensitive skin|fragrance free",
        {"scent": _SCENTS, "item package quantity": _PACKS},
        (6.0, 24.0),
    ),
    _t(
        "beauty",
        "face moisturizer",
        "face moisturizer",
        f"{BEAUTY} › Skin Care › Face › Creams & Moisturizers › Face Moisturizers",
        "Hydrating|Daily|Oil Free|Anti Aging|Lightweight",
        _BEAUTY_COMMON + "|hyaluronic acid|dry skin|anti aging|fragrance free|dermatologist tested",
        {"size": _BEAUTY_SIZES},
        (9.0, 65.0),
    ),
    _t(
        "beauty",
        "shampoo",
        "sulfate free shampoo",
        f"{BEAUTY} › Hair Care › Shampoo & Conditioner › Shampoos",
        "Volumizing|Moisturizing|Clarifying|Repairing|Color Safe",
        _BEAUTY_COMMON + "|damaged hair|hair growth|color treated|sulfate free",
        {"size": _BEAUTY_SIZES, "scent": _SCENTS},
        (7.0, 40.0),
    ),
    _t(
        "beauty",
        "eau de parfum spray",
        "perfume for women",
        f"{BEAUTY} › Fragrance › Women's › Eau de Parfum",
        "Floral|Oriental|Fresh|Woody|Signature",
        _BEAUTY_COMMON + "|gift set|long lasting fragrance|alcohol free",
        {"size": "1 fl oz|1.7 fl oz|3.4 fl oz|0.33 fl oz"},
        (25.0, 140.0),
    ),
    _t(
        "beauty",
        "lip balm",
        "lip balm",
        f"{BEAUTY} › Skin Care › Lip Care › Balms & Moisturizers",
        "Tinted|Hydrating|Medicated|Organic|Beeswax",
        _BEAUTY_COMMON + "|chapped lips|spf protection|dry skin",
        {
            "flavor name": "mint|cherry|vanilla|honey|coconut|unflavored",
            "item package quantity": _PACKS,
        },
        (3.0, 18.0),
    ),
    _t(
        "beauty",
        "nail polish",
        "nail polish",
        f"{BEAUTY} › Foot, Hand & Nail Care › Nail Art & Polish › Nail Polish",
        "Gel|Quick Dry|Glossy|Matte|Long Wear",
        _BEAUTY_COMMON + "|nail art|chip resistant|quick dry",
        {"color": _COLORS},
        (5.0, 22.0),
    ),
    _t(
        "beauty",
        "electric toothbrush",
        "electric toothbrush",
        f"{BEAUTY} › Oral Care › Toothbrushes & Accessories › Electric Toothbrushes",
        "Rechargeable|Sonic|Travel|Smart|Whitening",
        "long lasting|travel size|rechargeable battery|sensitive teeth|easy to use|timer|pressure sensor|replacement heads",
        {"color": _DEVICE_COLORS},
        (20.0, 120.0),
    ),
    _t(
        "food",
        "protein bar",
        "protein bars",
        f"{FOOD} › Snack Foods › Bars › Protein Bars",
        "Crunchy|Chewy|Whole Food|Low Sugar|Energy",
        _FOOD_COMMON + "|high protein|low sugar|individually wrapped|keto friendly|great snack",
        {"flavor name": _FLAVORS, "size": "12 count|15 count|20 count|24 count"},
        (12.0, 45.0),
    ),
    _t(
        "food",
        "herbal tea",
        "herbal tea bags",
        f"{FOOD} › Beverages › Coffee, Tea & Cocoa › Tea › Herbal",
        "Calming|Caffeine Free|Loose Leaf|Detox|Organic",
        _FOOD_COMMON + "|caffeine free|tea bags|sugar free|individually wrapped",
        {
            "flavor name": "chamomile|peppermint|ginger lemon|hibiscus|rooibos|lavender",
            "size": "20 count|40 count|100 count",
        },
        (5.0, 30.0),
    ),
    _t(
        "food",
        "ground coffee",
        "ground coffee",
        f"{FOOD} › Beverages › Coffee, Tea & Cocoa › Coffee › Ground Coffee",
        "Medium Roast|Dark Roast|Light Roast|Espresso|Breakfast Blend",
        _FOOD_COMMON + "|fair trade|single origin|whole bean|low acid",
        {
            "flavor name": "hazelnut|vanilla|french roast|colombian|mocha|original",
            "size": "12 ounce|2 pound|32 ounce|1 pound",
        },
        (8.0, 35.0),
    ),
    _t(
        "food",
        "trail mix",
        "trail mix snack",
        f"{FOOD} › Snack Foods › Trail Mix",
        "Roasted|Salted|Sweet and Salty|Tropical|Classic",
        _FOOD_COMMON + "|resealable bag|great snack|high protein|individually wrapped|ready to eat",
        {"flavor name": _FLAVORS, "item package quantity": _PACKS},
        (6.0, 30.0),
    ),
    _t(
        "food",
        "olive oil",
        "extra virgin olive oil",
        f"{FOOD} › Pantry Staples › Cooking Oils, Vinegars & Sprays › Oils › Olive",
        "Extra Virgin|Cold Pressed|Imported|Early Harvest|Unfiltered",
        _FOOD_COMMON + "|cold pressed|glass bottle|first cold press|keto friendly",
        {"size": "16.9 fl oz|25.3 fl oz|33.8 fl oz|101 fl oz"},
        (9.0, 50.0),
    ),
    _t(
        "food",
        "gummy candy",
        "gummy candy",
        f"{FOOD} › Snack Foods › Candy & Chocolate › Gummy Candy",
        "Sour|Fruity|Vegan|Assorted|Party",
        _FOOD_COMMON + "|party favors|valentine day|individually wrapped|fat free|dairy free",
        {
            "flavor name": "sour cherry|watermelon|peach|blue raspberry|mixed fruit|green apple",
            "size": "5 pound|2 pound|1 pound|8 ounce",
        },
        (5.0, 28.0),
    ),
    _t(
        "fashion",
        "crew neck t-shirt",
        "men's t-shirt",
        "Clothing, Shoes & Jewelry › Men › Clothing › Shirts › T-Shirts",
        "Classic|Cotton|Athletic|Vintage|Everyday",
        _CLOTHING_COMMON + "|cotton spandex|crew neck|short sleeve|relaxed fit|slim fit",
        {"color": _COLORS, "size": _CLOTHING_SIZES},
        (8.0, 35.0),
    ),
    _t(
        "fashion",
        "yoga leggings",
        "women's leggings",
        "Clothing, Shoes & Jewelry › Women › Clothing › Active › Leggings",
        "High Waisted|Seamless|Workout|Tummy Control|Butt Lift",
        _CLOTHING_COMMON + "|tummy control|high waist|elastic waistband|hidden pocket",
        {"color": _COLORS, "size": _CLOTHING_SIZES},
        (12.0, 45.0),
    ),
    _t(
        "fashion",
        "running shoes",
        "men's running shoes",
        "Clothing, Shoes & Jewelry › Men › Shoes › Athletic › Running",
        "Lightweight|Cushioned|Trail|Breathable|Road",
        "breathable fabric|rubber sole|lace up|arch support|non slip|lightweight design|memory foam",
        {"color": _COLORS, "size": _SHOE_SIZES},
        (30.0, 130.0),
    ),
    _t(
        "fashion",
        "hoodie sweatshirt",
        "pullover hoodie",
        "Clothing, Shoes & Jewelry › Women › Clothing › Fashion Hoodies & Sweatshirts",
        "Fleece|Oversized|Zip Up|Cropped|Pullover",
        _CLOTHING_COMMON + "|drawstring closure|kangaroo pocket|long sleeve|relaxed fit",
        {"color": _COLORS, "size": _CLOTHING_SIZES},
        (18.0, 60.0),
    ),
    _t(
        "fashion",
        "dress socks",
        "men's dress socks",
        "Clothing, Shoes & Jewelry › Men › Clothing › Socks › Dress Socks",
        "Patterned|Bamboo|Cushioned|Compression|Argyle",
        _CLOTHING_COMMON + "|non slip|arch support|reinforced heel",
        {"color": _COLORS, "item package quantity": _PACKS},
        (8.0, 30.0),
    ),
    _t(
        "fashion",
        "leather belt",
        "men's leather belt",
        "Clothing, Shoes & Jewelry › Men › Accessories › Belts",
        "Genuine Leather|Reversible|Casual|Ratchet|Braided",
        "genuine leather|alloy buckle|adjustable fit|gift box|casual wear|formal wear",
        {"color": "black|brown|tan|dark brown|cognac|navy", "size": "32|34|36|38|40|42"},
        (12.0, 50.0),
    ),
    _t(
        "furniture",
        "throw pillow cover",
        "throw pillow covers",
        f"{FURNITURE} › Home Décor › Decorative Pillows, Inserts & Covers › Throw Pillow Covers",
        "Velvet|Boho|Farmhouse|Linen|Geometric",
        _TEXTILE_COMMON + "|zipper closure|double sided|hidden zipper",
        {"color": _COLORS, "size": "16 x 16 inch|18 x 18 inch|20 x 20 inch|12 x 20 inch"},
        (8.0, 35.0),
    ),
    _t(
        "furniture",
        "bookshelf",
        "bookshelf",
        f"{FURNITURE} › Furniture › Living Room Furniture › Bookcases",
        "5 Tier|Industrial|Ladder|Corner|Cube",
        _FURNITURE_COMMON + "|wood finish|wall mounted|solid wood|storage space|metal frame",
        {"color": _FURNITURE_COLORS},
        (40.0, 220.0),
    ),
    _t(
        "furniture",
        "office chair",
        "ergonomic office chair",
        f"{FURNITURE} › Furniture › Home Office Furniture › Home Office Chairs",
        "Ergonomic|Mesh|High Back|Swivel|Executive",
        _FURNITURE_COMMON + "|lumbar support|adjustable height|steel frame|home office",
        {"color": "black|gray|white|blue|pink|green"},
        (60.0, 280.0),
    ),
    _t(
        "furniture",
        "coffee table",
        "coffee table",
        f"{FURNITURE} › Furniture › Living Room Furniture › Tables › Coffee Tables",
        "Lift Top|Round|Rustic|Modern|Glass",
        _FURNITURE_COMMON + "|wood finish|tempered glass|solid wood|storage space|metal frame",
        {"color": _FURNITURE_COLORS},
        (50.0, 300.0),
    ),
    _t(
        "furniture",
        "blackout curtains",
        "blackout curtains",
        f"{FURNITURE} › Home Décor › Window Treatments › Curtains & Drapes › Panels",
        "Thermal|Room Darkening|Grommet|Sheer|Linen",
        _TEXTILE_COMMON + "|thermal insulated|blackout|noise reducing",
        {"color": _COLORS, "size": "52 x 63 inch|52 x 84 inch|52 x 95 inch|52 x 108 inch"},
        (15.0, 60.0),
    ),
    _t(
        "furniture",
        "bed sheet set",
        "queen sheet set",
        f"{FURNITURE} › Bedding › Sheets & Pillowcases › Sheet & Pillowcase Sets",
        "Microfiber|Bamboo|Egyptian Cotton|Deep Pocket|Cooling",
        _TEXTILE_COMMON + "|deep pocket|cooling|fade resistant",
        {"color": _COLORS, "size": "twin|full|queen|king|california king"},
        (20.0, 110.0),
    ),
    _t(
        "furniture",
        "storage ottoman",
        "storage ottoman",
        f"{FURNITURE} › Furniture › Living Room Furniture › Ottomans",
        "Folding|Tufted|Faux Leather|Round|Cube",
        _FURNITURE_COMMON + "|faux leather|foot rest|storage space",
        {"color": _FURNITURE_COLORS},
        (25.0, 120.0),
    ),
    _t(
        "electronics",
        "wireless earbuds",
        "bluetooth earbuds",
        f"{ELECTRONICS} › Headphones, Earbuds & Accessories › Earbuds",
        "True Wireless|Sport|Noise Cancelling|Mini|Waterproof",
        _ELECTRONICS_COMMON
        + "|charging case|built in microphone|noise cancelling|wireless bluetooth|long battery life|water resistant",
        {"color": _DEVICE_COLORS},
        (15.0, 180.0),
    ),
    _t(
        "electronics",
        "usb c charger",
        "usb c charger",
        f"{ELECTRONICS} › Cell Phones & Accessories › Chargers & Power Adapters › Wall Chargers",
        "Fast|Compact|Dual Port|GaN|Foldable",
        _ELECTRONICS_COMMON + "|usb c|fast charging|dual port|foldable plug",
        {"color": "black|white", "item package quantity": _PACKS},
        (9.0, 45.0),
    ),
    _t(
        "electronics",
        "hdmi cable",
        "hdmi cable",
        f"{ELECTRONICS} › Television & Video › Accessories › Cables › HDMI Cables",
        "High Speed|Braided|4K|8K|Ultra",
        _ELECTRONICS_COMMON + "|gold plated|ethernet|high speed|high definition",
        {"size": "3 feet|6 feet|10 feet|15 feet|25 feet", "item package quantity": _PACKS},
        (6.0, 30.0),
    ),
    _t(
        "electronics",
        "portable speaker",
        "bluetooth speaker",
        f"{ELECTRONICS} › Portable Audio & Video › Portable Speakers & Docks › Portable Bluetooth Speakers",
        "Waterproof|Rugged|Mini|Party|Outdoor",
        _ELECTRONICS_COMMON
        + "|stereo sound|built in microphone|wireless bluetooth|long battery life|water resistant",
        {"color": _DEVICE_COLORS},
        (20.0, 150.0),
    ),
    _t(
        "electronics",
        "phone case",
        "iphone case",
        f"{ELECTRONICS} › Cell Phones & Accessories › Cases, Holsters & Sleeves › Basic Cases",
        "Shockproof|Clear|Slim|Rugged|Magnetic",
        "shock absorption|wireless charging|easy install|slim design|raised edges|scratch resistant",
        {"color": _COLORS, "style": "iphone 13|iphone 14|iphone 15|iphone 15 pro|galaxy s23"},
        (7.0, 35.0),
    ),
    _t(
        "electronics",
        "security camera",
        "wifi security camera",
        f"{ELECTRONICS} › Camera & Photo › Video Surveillance › Surveillance Cameras › Dome Cameras",
        "Indoor|Outdoor|Pan Tilt|Wireless|Battery Powered",
        _ELECTRONICS_COMMON
        + "|night vision|motion detection|two way audio|high definition|dual band",
        {"color": "white|black", "item package quantity": "pack of 1|pack of 2|pack of 4"},
        (25.0, 160.0),
    ),
)

_BRAND_TEXT = (
    "Lumora|Verdant|Oakridge|Solace|Northwind|Brightfield|Kestrel|Marigold|Pinecrest|Havenly|"
    "Coastline|Ember|Juniper|Aurelia|Summit|Maplewood|Bluebird|Ironbark|Willowby|Zephyr|"
    "Cobalt|Fernhill|Golden Meadow|Riverstone|Silverleaf|Truvia|Urbanite|Vantage|Wildgrove|"
    "Yarrow|Alderwood|Briar|Cascadia|Driftwood|Everglow|Foxglove|Granite Peak|Hollyhock|"
    "Indigo Bay|Larkspur"
)
BRANDS: tuple[str, ...] = tuple(_BRAND_TEXT.split("|"))

REVIEW_TITLES = (
    "Exactly what I needed",
    "Great value",
    "Works as described",
    "Not bad for the price",
    "Would buy again",
    "Disappointed",
    "Better than expected",
    "Good quality",
)
REVIEW_BODIES = (
    "I bought this {noun} for everyday use and it has held up well.",
    "The {noun} arrived quickly and looks just like the pictures.",
    "Decent {noun}, though I wish it came in more options.",
    "My second {noun} from this brand; consistent quality.",
    "It does the job, but the {noun} felt a little cheap to me.",
    "Gift for my sister, she loves the {noun}.",
)
INSTRUCTION_OPENERS = (
    "i'm looking for",
    "i need",
    "i want",
    "find me",
    "i would like",
    "please get me",
    "can you find",
    "show me",
)
