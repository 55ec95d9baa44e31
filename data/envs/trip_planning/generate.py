#!/usr/bin/env python3
"""Seeded generator for the trip_planning environment data.

Usage:
    /usr/bin/python3 generate.py --seed 20251001 -o schema.sql

The output is plain SQLite SQL (CREATE TABLE ...; INSERT ...;).  The generator
only uses random.Random(seed) and never iterates over sets or dicts whose order
depends on hashing, so the same seed always gives a byte-identical file.

Data guarantees (checked by assertions at the end of generation):
  * >= 24 real Chinese cities, Hangzhou among them;
  * every name of a hotel, restaurant and attraction is globally unique
    (across all three tables) and starts with its city's name;
  * NO hotel costs less than 200 CNY per night (the three_day_trip task also
    states a rule for p < 200, but the data never exercises it);
  * every city has >= 2 hotels in each tier [200, 500), [500, 800) and >= 800 CNY
    per night (Suzhou >= 3 in [200, 500));
  * restaurant ratings lie in 2.5..4.9 (one decimal); every city has >= 3
    restaurants rated >= 4.0 and >= 2 rated below 3.2;
  * attraction tickets lie in 0..300 CNY; every city has >= 2 attractions with
    a ticket below 120 CNY and >= 1 with a ticket of 180 CNY or more;
  * weather rows exist for every city and every date 2025-09-28..2025-10-08.

Task-specific adjustments ("scenario fix-ups") are applied to Suzhou so that the
cheapest_rated_hotel task has a cheaper-but-underrated decoy and a price tie
that its name tie rule must break.  They are documented in _fixup_suzhou().
"""

import argparse
import datetime
import math
import random

DEFAULT_SEED = 20251001

FIRST_DATE = datetime.date(2025, 9, 28)
LAST_DATE = datetime.date(2025, 10, 8)

# name, province, region, latitude, longitude, population (millions),
# local cuisine, has_metro, has_airport, typical early-October high (deg C),
# probability of a wet day, one-line description
CITIES = [
    ("Hangzhou", "Zhejiang", "East China", 30.27, 120.16, 12.4, "Zhejiang", True, True, 26, 0.30,
     "Provincial capital famed for West Lake, Longjing tea and silk."),
    ("Shanghai", "Shanghai", "East China", 31.23, 121.47, 24.9, "Shanghainese", True, True, 25, 0.30,
     "Coastal metropolis known for the Bund, Art Deco streets and a dense skyline."),
    ("Beijing", "Beijing", "North China", 39.90, 116.40, 21.9, "Beijing", True, True, 21, 0.15,
     "The national capital, home to imperial palaces, hutongs and the Great Wall nearby."),
    ("Suzhou", "Jiangsu", "East China", 31.30, 120.58, 12.9, "Suzhou", True, False, 25, 0.30,
     "Canal city celebrated for classical gardens and silk embroidery."),
    ("Nanjing", "Jiangsu", "East China", 32.06, 118.80, 9.5, "Huaiyang", True, True, 24, 0.28,
     "Former imperial capital on the Yangtze with Ming-era walls and plane-tree avenues."),
    ("Ningbo", "Zhejiang", "East China", 29.87, 121.55, 9.6, "Ningbo", True, True, 25, 0.32,
     "Port city with ancient libraries, seafood and nearby islands."),
    ("Shaoxing", "Zhejiang", "East China", 30.00, 120.58, 5.3, "Shaoxing", True, False, 26, 0.30,
     "Water town known for rice wine, black-awning boats and literary history."),
    ("Huangshan", "Anhui", "East China", 29.71, 118.34, 1.3, "Anhui", False, True, 23, 0.35,
     "Gateway to the Yellow Mountains and Hui-style villages."),
    ("Hefei", "Anhui", "East China", 31.82, 117.23, 9.6, "Anhui", True, True, 24, 0.25,
     "Lakeside provincial capital and science hub."),
    ("Xiamen", "Fujian", "East China", 24.48, 118.09, 5.3, "Fujian", True, True, 29, 0.25,
     "Island city with colonial Gulangyu, seaside promenades and temples."),
    ("Fuzhou", "Fujian", "East China", 26.07, 119.30, 8.4, "Fujian", True, True, 29, 0.30,
     "Banyan-shaded capital with historic lanes and hot springs."),
    ("Qingdao", "Shandong", "East China", 36.07, 120.38, 10.3, "Shandong", True, True, 21, 0.20,
     "Seaside city of beaches, German-era architecture and beer."),
    ("Jinan", "Shandong", "East China", 36.65, 117.12, 9.4, "Shandong", True, True, 22, 0.18,
     "City of springs near Mount Tai and Daming Lake."),
    ("Guangzhou", "Guangdong", "South China", 23.13, 113.26, 18.8, "Cantonese", True, True, 30, 0.30,
     "Trading city on the Pearl River, the home of dim sum."),
    ("Shenzhen", "Guangdong", "South China", 22.54, 114.06, 17.7, "Cantonese", True, True, 30, 0.30,
     "Young tech metropolis with coastal parks and theme parks."),
    ("Guilin", "Guangxi", "South China", 25.27, 110.29, 4.9, "Guangxi", False, True, 27, 0.25,
     "Karst-peak landscape along the Li River."),
    ("Sanya", "Hainan", "South China", 18.25, 109.51, 1.0, "Hainanese", False, True, 31, 0.40,
     "Tropical beach resort at the southern tip of Hainan island."),
    ("Chengdu", "Sichuan", "Southwest China", 30.57, 104.07, 21.4, "Sichuan", True, True, 23, 0.40,
     "Laid-back capital of giant pandas, teahouses and spicy food."),
    ("Chongqing", "Chongqing", "Southwest China", 29.56, 106.55, 32.1, "Chongqing", True, True, 25, 0.40,
     "Mountain city at the meeting of the Yangtze and Jialing rivers, famous for hotpot."),
    ("Kunming", "Yunnan", "Southwest China", 25.04, 102.71, 8.6, "Yunnan", True, True, 21, 0.35,
     "The Spring City, gateway to Yunnan's lakes and stone forests."),
    ("Lijiang", "Yunnan", "Southwest China", 26.86, 100.23, 1.3, "Naxi", False, True, 19, 0.30,
     "Naxi old town beneath Jade Dragon Snow Mountain."),
    ("Lhasa", "Tibet", "Southwest China", 29.65, 91.13, 0.9, "Tibetan", False, True, 18, 0.15,
     "High-altitude holy city of the Potala Palace and Jokhang Temple."),
    ("Xi'an", "Shaanxi", "Northwest China", 34.34, 108.94, 13.0, "Shaanxi", True, True, 21, 0.30,
     "Ancient capital of the Terracotta Army and intact city walls."),
    ("Wuhan", "Hubei", "Central China", 30.59, 114.31, 13.7, "Hubei", True, True, 26, 0.25,
     "River city of the Yellow Crane Tower and East Lake."),
    ("Changsha", "Hunan", "Central China", 28.23, 112.94, 10.4, "Hunan", True, True, 27, 0.25,
     "Lively Hunan capital of spicy snacks and Orange Isle."),
    ("Zhengzhou", "Henan", "Central China", 34.75, 113.63, 12.8, "Henan", True, True, 23, 0.20,
     "Rail hub close to the Shaolin Temple and the Yellow River."),
    ("Harbin", "Heilongjiang", "Northeast China", 45.80, 126.53, 9.9, "Dongbei", True, True, 14, 0.15,
     "Northern city with Russian-style architecture and winter ice festivals."),
    ("Dalian", "Liaoning", "Northeast China", 38.91, 121.61, 7.5, "Dongbei", True, True, 19, 0.15,
     "Harbour city of squares, coastal roads and seafood."),
    ("Tianjin", "Tianjin", "North China", 39.34, 117.36, 13.7, "Tianjin", True, True, 21, 0.15,
     "Port city with European concessions and street snacks."),
]

DISTRICTS = ["Old Town", "Riverside", "Central", "University", "Railway Station", "Lakeside",
             "Hi-Tech Zone", "Harbour", "North Gate", "South Gate", "East Bank", "West Bank"]

# --- hotels ------------------------------------------------------------------
HOTEL_WORDS = ["Royal", "Jade", "Golden", "Silver", "Peony", "Harmony", "Riverside", "Imperial",
               "Pearl", "Crane", "Phoenix", "Orchid", "Maple", "Cloud", "Starlight", "Plum Blossom",
               "Lakeview", "Panorama", "Heritage", "Summit", "Sunrise", "Tranquil", "Magnolia",
               "Evergreen", "Horizon", "Oriental"]
HOTEL_NOUNS = {
    "luxury": ["Grand Hotel", "Palace Hotel", "Resort", "Regency Hotel"],
    "mid": ["Hotel", "Suites", "Boutique Hotel", "Plaza Hotel"],
    "budget": ["Inn", "Express Inn", "Guesthouse", "Lodge"],
}
HOTEL_PRICES = {
    "budget": [200, 218, 238, 258, 268, 288, 299, 318, 328, 358, 368, 388, 399, 420, 438, 458,
               468, 488, 499],
    "mid": [500, 518, 538, 568, 588, 599, 620, 658, 680, 699, 720, 738, 760, 780, 799],
    "luxury": [800, 828, 858, 888, 920, 960, 999, 1080, 1188, 1280, 1388, 1499, 1680, 1888, 2088],
}
HOTEL_STARS = {"budget": [2, 3], "mid": [3, 4], "luxury": [4, 5]}
HOTEL_RATING_TENTHS = {"budget": (28, 46), "mid": (33, 48), "luxury": (37, 49)}

# --- restaurants -------------------------------------------------------------
RESTAURANT_WORDS = ["Jade Dragon", "Red Lantern", "Bamboo Grove", "Golden Wok", "Spring Breeze",
                    "Peach Blossom", "Lucky Star", "Silk Road", "Moonlight", "Misty River",
                    "Twin Fish", "Copper Pot", "Willow Bank", "Chili Flame", "Lotus Pond",
                    "Green Tea", "Happy Buddha", "Old Well", "Eight Treasures", "Morning Dew",
                    "Blue Porcelain", "Stone Bridge", "Lantern Alley", "Harvest Moon",
                    "Clay Oven", "Rice Field"]
RESTAURANT_KINDS = ["Kitchen", "Bistro", "Noodle House", "Dumpling House", "Hotpot", "Tea House",
                    "Grill", "Canteen", "Eatery", "Dining Hall", "Restaurant", "Brasserie"]
OTHER_CUISINES = ["Cantonese", "Sichuan", "Hunan", "Shandong", "Huaiyang", "Western", "Japanese",
                  "Korean", "Vegetarian", "Hotpot", "Noodles", "Seafood", "Barbecue"]
RESTAURANT_HOURS = ["10:00-21:00", "10:30-21:30", "11:00-14:00, 17:00-21:30", "11:00-22:00",
                    "09:00-20:30", "11:30-23:00"]

# --- attractions -------------------------------------------------------------
ATTRACTION_WORDS = ["Celestial", "Nine Dragon", "White Crane", "Azure Cloud", "Thousand Buddha",
                    "Jade Spring", "Red Cliff", "Golden Peak", "Moon Lake", "Phoenix Hill",
                    "Silver Stream", "Ancient Pine", "Heavenly Pond", "Misty Valley",
                    "Purple Mountain", "Sunset Bay", "Dragon Gate", "Seven Stars", "Tiger Hill",
                    "Lion Rock", "Scholar", "Emperor", "Bright Pearl", "Flower Harbour"]
# noun, category, ticket choices (CNY), opening hours
ATTRACTION_NOUNS = [
    ("Old Street", "historic street", [0], "00:00-24:00"),
    ("Temple", "religious site", [0, 10, 15, 20, 25, 30, 40, 50], "07:00-17:00"),
    ("Museum", "museum", [0, 0, 20, 30, 40, 60], "09:00-17:00"),
    ("City Park", "park", [0, 0, 5, 10], "06:00-22:00"),
    ("Classical Garden", "garden", [30, 40, 45, 55, 60, 70, 80, 90], "07:30-17:30"),
    ("Pagoda", "historic site", [20, 25, 30, 40, 50, 60, 70, 80], "08:00-17:30"),
    ("Ancient Town", "historic site", [60, 80, 95, 100, 110, 119, 120, 130, 150], "08:00-21:00"),
    ("Theme Park", "amusement park", [180, 199, 220, 240, 260, 280, 300], "09:30-21:00"),
    ("Aquarium", "amusement park", [110, 119, 120, 150, 160, 179, 180, 200, 220], "09:00-18:00"),
    ("Zoo", "zoo", [40, 60, 80, 100, 120, 150], "07:30-17:30"),
    ("Scenic Area", "nature", [80, 100, 120, 150, 160, 180, 200, 230, 260], "07:00-18:00"),
    ("Wetland Park", "nature", [0, 0, 20, 40, 60, 80], "08:00-17:30"),
    ("Palace", "historic site", [40, 60, 80, 100, 120, 140, 160], "08:30-17:00"),
    ("Science Center", "museum", [30, 45, 60, 80, 100, 120], "09:00-17:00"),
    ("Observation Tower", "landmark", [90, 119, 150, 179, 180, 198, 220, 260], "09:00-22:30"),
    ("River Cruise", "cruise", [100, 120, 150, 180, 220, 280], "10:00-21:30"),
    ("Botanical Garden", "garden", [10, 15, 20, 30, 40, 60], "07:00-18:00"),
    ("Art Gallery", "museum", [0, 0, 20, 40, 60, 80], "10:00-18:00"),
]

WEATHER_DRY = [("Sunny", 4), ("Partly Cloudy", 3), ("Cloudy", 2), ("Overcast", 1)]
WEATHER_WET = [("Light Rain", 5), ("Moderate Rain", 3), ("Heavy Rain", 1), ("Thunderstorm", 1)]

AIRLINES = ["MU", "CA", "CZ", "HU", "ZH", "3U", "MF", "FM"]


# -----------------------------------------------------------------------------
def _weighted(rng, pairs):
    total = sum(w for _, w in pairs)
    x = rng.randrange(total)
    for value, w in pairs:
        if x < w:
            return value
        x -= w
    raise AssertionError("unreachable")


def _tier(price):
    if price >= 800:
        return "luxury"
    if price >= 500:
        return "mid"
    if price >= 200:
        return "budget"
    return "below200"


def _gen_hotels(rng, city):
    while True:
        hotels = _gen_hotels_once(rng, city)
        if sum(1 for h in hotels if h["rating"] >= 4.0) >= 2:
            return hotels


def _gen_hotels_once(rng, city):
    n = rng.randint(7, 10)
    tiers = ["budget", "budget", "mid", "mid", "luxury", "luxury"]
    if city == "Suzhou":  # the cheapest_rated_hotel fix-up needs three budget hotels
        tiers.append("budget")
    while len(tiers) < n:
        tiers.append(rng.choice(["budget", "mid", "luxury"]))
    words = rng.sample(HOTEL_WORDS, n)
    hotels = []
    for tier, word in zip(tiers, words):
        lo, hi = HOTEL_RATING_TENTHS[tier]
        hotels.append({
            "name": "%s %s %s" % (city, word, rng.choice(HOTEL_NOUNS[tier])),
            "city": city,
            "district": rng.choice(DISTRICTS),
            "stars": rng.choice(HOTEL_STARS[tier]),
            "price_per_night": rng.choice(HOTEL_PRICES[tier]),
            "rating": rng.randint(lo, hi) / 10.0,
        })
    rng.shuffle(hotels)
    return hotels


def _restaurant_price(rng):
    bucket = _weighted(rng, [("cheap", 40), ("mid", 35), ("upscale", 25)])
    if bucket == "cheap":
        return rng.randrange(28, 90, 2)
    if bucket == "mid":
        return rng.randrange(90, 200, 2)
    return rng.randrange(200, 421, 5)


def _restaurant_rating(rng):
    # Mixture that keeps the full 2.5-4.9 spread but puts real weight on both sides of
    # the day-2 bars (3.2 and 4.0): 40 % poor, 25 % middling, 35 % good.
    band = _weighted(rng, [("poor", 40), ("middling", 25), ("good", 35)])
    lo, hi = {"poor": (25, 31), "middling": (32, 39), "good": (40, 49)}[band]
    return rng.randint(lo, hi) / 10.0


def _gen_restaurants(rng, city, local_cuisine):
    while True:
        n = rng.randint(8, 12)
        words = rng.sample(RESTAURANT_WORDS, n)
        out = []
        for word in words:
            if rng.random() < 0.4:
                cuisine = local_cuisine
            else:
                cuisine = rng.choice(OTHER_CUISINES)
            out.append({
                "name": "%s %s %s" % (city, word, rng.choice(RESTAURANT_KINDS)),
                "city": city,
                "district": rng.choice(DISTRICTS),
                "cuisine": cuisine,
                "price_per_person": _restaurant_price(rng),
                "rating": _restaurant_rating(rng),
                "opening_hours": rng.choice(RESTAURANT_HOURS),
            })
        good = sum(1 for r in out if r["rating"] >= 4.0)
        poor = sum(1 for r in out if r["rating"] < 3.2)
        if good >= 3 and poor >= 2:
            return out


def _gen_attractions(rng, city):
    while True:
        n = rng.randint(6, 10)
        words = rng.sample(ATTRACTION_WORDS, n)
        nouns = rng.sample(ATTRACTION_NOUNS, n)
        out = []
        for word, (noun, category, tickets, hours) in zip(words, nouns):
            out.append({
                "name": "%s %s %s" % (city, word, noun),
                "city": city,
                "district": rng.choice(DISTRICTS),
                "category": category,
                "ticket_price": rng.choice(tickets),
                "rating": rng.randint(30, 49) / 10.0,
                "open_hours": hours,
                "recommended_hours": rng.choice([1.0, 1.5, 2.0, 2.5, 3.0, 4.0]),
            })
        cheap = sum(1 for a in out if a["ticket_price"] < 120)
        dear = sum(1 for a in out if a["ticket_price"] >= 180)
        if cheap >= 2 and dear >= 1:
            return out


def _gen_city_transport(rng, city, has_metro):
    rows = []
    if has_metro:
        rows.append({"city": city, "mode": "metro", "base_price": float(rng.choice([2, 3])),
                     "price_per_km": None, "operating_hours": "06:00-23:00",
                     "description": "Metro; fare by distance, %d-%d CNY per ride."
                     % (2, rng.choice([7, 8, 9, 10]))})
    rows.append({"city": city, "mode": "bus", "base_price": float(rng.choice([1, 2])),
                 "price_per_km": None, "operating_hours": "05:30-22:30",
                 "description": "City bus; flat fare per ride."})
    base = float(rng.choice([10, 11, 12, 13, 14]))
    per_km = rng.choice([2.0, 2.2, 2.3, 2.5, 2.7])
    rows.append({"city": city, "mode": "taxi", "base_price": base, "price_per_km": per_km,
                 "operating_hours": "00:00-24:00",
                 "description": "Taxi; base fare covers the first 3 km, then the per-km price."})
    rows.append({"city": city, "mode": "bike_share", "base_price": 1.5, "price_per_km": None,
                 "operating_hours": "00:00-24:00",
                 "description": "Shared bicycle; 1.5 CNY per 30 minutes."})
    return rows


def _haversine_km(a, b):
    lat1, lon1, lat2, lon2 = map(math.radians, (a[3], a[4], b[3], b[4]))
    h = (math.sin((lat2 - lat1) / 2) ** 2
         + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2)
    return 2 * 6371.0 * math.asin(math.sqrt(h))


def _hhmm(minutes):
    return "%02d:%02d" % (minutes // 60, minutes % 60)


def _gen_inter_city(rng):
    rows = []
    used = set()

    def new_code(prefix):
        while True:
            code = "%s%d" % (prefix, rng.randint(1000, 9999))
            if code not in used:
                used.add(code)
                return code

    no_rail = ("Lhasa", "Sanya")
    for a in CITIES:
        for b in CITIES:
            if a[0] == b[0]:
                continue
            d = _haversine_km(a, b)
            rail_km = d * 1.25
            if a[0] not in no_rail and b[0] not in no_rail and rail_km <= 1700:
                if rail_km < 350:
                    n_trains = rng.choice([2, 3, 3, 4])
                elif rail_km < 900:
                    n_trains = rng.choice([1, 2, 2, 3])
                else:
                    n_trains = rng.choice([0, 1, 1, 2])
                for _ in range(n_trains):
                    fast = rng.random() < 0.75
                    speed = 250.0 if fast else 180.0
                    duration = int(round((rail_km / speed * 60 + rng.randint(8, 30)) / 5.0)) * 5
                    rate = 0.46 if fast else 0.32
                    price = int(round(rail_km * rate + rng.randint(3, 15)))
                    latest = 23 * 60 - duration
                    depart = rng.randrange(6 * 60, max(6 * 60 + 5, latest), 5)
                    rows.append({"code": new_code("G" if fast else "D"), "mode": "train",
                                 "from_city": a[0], "to_city": b[0],
                                 "depart_time": _hhmm(depart),
                                 "arrive_time": _hhmm(depart + duration),
                                 "duration_minutes": duration, "price": price})
            if a[8] and b[8] and d >= 450:
                n_flights = 2 if d >= 1000 else rng.choice([0, 1, 1, 2])
                for _ in range(n_flights):
                    duration = int(round((d / 700.0 * 60 + rng.randint(30, 50)) / 5.0)) * 5
                    price = int(round((200 + d * 0.6) * rng.uniform(0.8, 1.3) / 10.0)) * 10
                    latest = 23 * 60 + 30 - duration
                    depart = rng.randrange(7 * 60, latest, 5)
                    rows.append({"code": new_code(rng.choice(AIRLINES)), "mode": "flight",
                                 "from_city": a[0], "to_city": b[0],
                                 "depart_time": _hhmm(depart),
                                 "arrive_time": _hhmm(depart + duration),
                                 "duration_minutes": duration, "price": price})
    return rows


def _gen_weather(rng, city_row):
    rows = []
    day = FIRST_DATE
    while day <= LAST_DATE:
        wet = rng.random() < city_row[10]
        condition = _weighted(rng, WEATHER_WET if wet else WEATHER_DRY)
        high = city_row[9] + rng.randint(-3, 3) - (1 if wet else 0)
        low = high - rng.randint(5, 10)
        rows.append({"city": city_row[0], "date": day.isoformat(), "condition": condition,
                     "temp_high_c": high, "temp_low_c": low})
        day += datetime.timedelta(days=1)
    return rows


def _fixup_suzhou(hotels):
    """Scenario fix-up for task cheapest_rated_hotel (city Suzhou, rating >= 4.0).

    Among Suzhou's three cheapest budget hotels (by price, then name):
      * the cheapest gets rating 3.9: a cheaper decoy just below the 4.0 bar;
      * the 2nd and 3rd get ratings 4.0 and 4.4 and the same price (the 2nd's),
        so the cheapest qualifying price is shared and the name tie rule decides.
    Every other Suzhou hotel costs at least that price, so the tie is at the minimum.
    """
    budget = sorted([h for h in hotels if h["city"] == "Suzhou" and h["price_per_night"] < 500],
                    key=lambda h: (h["price_per_night"], h["name"]))
    assert len(budget) >= 3
    decoy, first, second = budget[0], budget[1], budget[2]
    if decoy["price_per_night"] == first["price_per_night"]:
        decoy["price_per_night"] = max(200, first["price_per_night"] - 20)
    if decoy["price_per_night"] == first["price_per_night"]:
        first["price_per_night"] += 20
    decoy["rating"] = 3.9
    first["rating"] = 4.0
    second["rating"] = 4.4
    second["price_per_night"] = first["price_per_night"]
    qualifying = [h for h in hotels if h["city"] == "Suzhou" and h["rating"] >= 4.0]
    low = min(h["price_per_night"] for h in qualifying)
    assert low == first["price_per_night"]
    assert sum(1 for h in qualifying if h["price_per_night"] == low) >= 2
    assert decoy["price_per_night"] < low


def generate(seed):
    rng = random.Random(seed)
    cities, hotels, restaurants, attractions, city_transport, weather = [], [], [], [], [], []
    for c in CITIES:
        cities.append({"name": c[0], "province": c[1], "region": c[2], "latitude": c[3],
                       "longitude": c[4], "population_millions": c[5], "local_cuisine": c[6],
                       "has_metro": 1 if c[7] else 0, "has_airport": 1 if c[8] else 0,
                       "description": c[11]})
        hotels.extend(_gen_hotels(rng, c[0]))
        restaurants.extend(_gen_restaurants(rng, c[0], c[6]))
        attractions.extend(_gen_attractions(rng, c[0]))
        city_transport.extend(_gen_city_transport(rng, c[0], c[7]))
        weather.extend(_gen_weather(rng, c))
    inter = _gen_inter_city(rng)
    _fixup_suzhou(hotels)
    data = {"cities": cities, "hotels": hotels, "restaurants": restaurants,
            "attractions": attractions, "city_transport": city_transport,
            "inter_city_transport": inter, "weather": weather}
    _check(data)
    return data


def _check(data):
    names = [c["name"] for c in data["cities"]]
    assert len(names) >= 24 and "Hangzhou" in names and len(set(names)) == len(names)
    all_names = ([h["name"] for h in data["hotels"]] + [r["name"] for r in data["restaurants"]]
                 + [a["name"] for a in data["attractions"]])
    assert len(set(all_names)) == len(all_names), "entity names must be globally unique"
    for h in data["hotels"]:
        # Guarantee relied on by the three_day_trip task: no hotel below 200 CNY.
        assert h["price_per_night"] >= 200, h
        assert 1.0 <= h["rating"] <= 5.0 and 1 <= h["stars"] <= 5
    for r in data["restaurants"]:
        assert 2.5 <= r["rating"] <= 4.9 and r["price_per_person"] > 0
    for a in data["attractions"]:
        assert 0 <= a["ticket_price"] <= 300 and 1.0 <= a["rating"] <= 5.0
    n_dates = (LAST_DATE - FIRST_DATE).days + 1
    for city in names:
        hs = [h for h in data["hotels"] if h["city"] == city]
        assert 6 <= len(hs) <= 10
        tiers = [_tier(h["price_per_night"]) for h in hs]
        assert tiers.count("budget") >= 2 and tiers.count("mid") >= 2
        assert tiers.count("luxury") >= 2 and tiers.count("below200") == 0
        assert any(h["rating"] >= 4.0 for h in hs)
        rs = [r for r in data["restaurants"] if r["city"] == city]
        assert 8 <= len(rs) <= 12
        assert sum(1 for r in rs if r["rating"] >= 4.0) >= 3
        assert sum(1 for r in rs if r["rating"] < 3.2) >= 2
        ats = [a for a in data["attractions"] if a["city"] == city]
        assert 6 <= len(ats) <= 10
        assert sum(1 for a in ats if a["ticket_price"] < 120) >= 2
        assert any(a["ticket_price"] >= 180 for a in ats)
        assert sum(1 for w in data["weather"] if w["city"] == city) == n_dates
        assert all(h["name"].startswith(city + " ") for h in hs)
    codes = [t["code"] for t in data["inter_city_transport"]]
    assert len(set(codes)) == len(codes)


# --- SQL output ----------------------------------------------------------------
SCHEMA = """\
CREATE TABLE cities (
    name TEXT PRIMARY KEY,
    province TEXT NOT NULL,
    region TEXT NOT NULL,
    latitude REAL NOT NULL,
    longitude REAL NOT NULL,
    population_millions REAL NOT NULL,
    local_cuisine TEXT NOT NULL,
    has_metro INTEGER NOT NULL CHECK (has_metro IN (0, 1)),
    has_airport INTEGER NOT NULL CHECK (has_airport IN (0, 1)),
    description TEXT NOT NULL
);
CREATE TABLE hotels (
    name TEXT PRIMARY KEY,
    city TEXT NOT NULL REFERENCES cities(name),
    district TEXT NOT NULL,
    stars INTEGER NOT NULL CHECK (stars BETWEEN 1 AND 5),
    price_per_night INTEGER NOT NULL CHECK (price_per_night >= 0),  -- CNY per night
    rating REAL NOT NULL CHECK (rating BETWEEN 1.0 AND 5.0)          -- one decimal
);
CREATE TABLE restaurants (
    name TEXT PRIMARY KEY,
    city TEXT NOT NULL REFERENCES cities(name),
    district TEXT NOT NULL,
    cuisine TEXT NOT NULL,
    price_per_person INTEGER NOT NULL CHECK (price_per_person >= 0), -- average CNY per person
    rating REAL NOT NULL CHECK (rating BETWEEN 1.0 AND 5.0),
    opening_hours TEXT NOT NULL
);
CREATE TABLE attractions (
    name TEXT PRIMARY KEY,
    city TEXT NOT NULL REFERENCES cities(name),
    district TEXT NOT NULL,
    category TEXT NOT NULL,
    ticket_price INTEGER NOT NULL CHECK (ticket_price >= 0),         -- CNY per adult, 0 = free
    rating REAL NOT NULL CHECK (rating BETWEEN 1.0 AND 5.0),
    open_hours TEXT NOT NULL,
    recommended_hours REAL NOT NULL
);
CREATE TABLE city_transport (
    city TEXT NOT NULL REFERENCES cities(name),
    mode TEXT NOT NULL,
    base_price REAL NOT NULL,       -- CNY per ride (taxi: base fare for the first 3 km)
    price_per_km REAL,              -- CNY per km beyond the base distance, NULL if flat
    operating_hours TEXT NOT NULL,
    description TEXT NOT NULL,
    PRIMARY KEY (city, mode)
);
CREATE TABLE inter_city_transport (
    code TEXT PRIMARY KEY,
    mode TEXT NOT NULL CHECK (mode IN ('train', 'flight')),
    from_city TEXT NOT NULL REFERENCES cities(name),
    to_city TEXT NOT NULL REFERENCES cities(name),
    depart_time TEXT NOT NULL,      -- HH:MM local time, runs daily
    arrive_time TEXT NOT NULL,      -- HH:MM local time, same day
    duration_minutes INTEGER NOT NULL,
    price INTEGER NOT NULL          -- CNY per person (train: second class, flight: economy)
);
CREATE TABLE weather (
    city TEXT NOT NULL REFERENCES cities(name),
    date TEXT NOT NULL,             -- YYYY-MM-DD
    condition TEXT NOT NULL,
    temp_high_c INTEGER NOT NULL,
    temp_low_c INTEGER NOT NULL,
    PRIMARY KEY (city, date)
);
CREATE INDEX hotels_city ON hotels(city);
CREATE INDEX restaurants_city ON restaurants(city);
CREATE INDEX attractions_city ON attractions(city);
CREATE INDEX inter_city_route ON inter_city_transport(from_city, to_city);
"""

COLUMNS = {
    "cities": ["name", "province", "region", "latitude", "longitude", "population_millions",
               "local_cuisine", "has_metro", "has_airport", "description"],
    "hotels": ["name", "city", "district", "stars", "price_per_night", "rating"],
    "restaurants": ["name", "city", "district", "cuisine", "price_per_person", "rating",
                    "opening_hours"],
    "attractions": ["name", "city", "district", "category", "ticket_price", "rating",
                    "open_hours", "recommended_hours"],
    "city_transport": ["city", "mode", "base_price", "price_per_km", "operating_hours",
                       "description"],
    "inter_city_transport": ["code", "mode", "from_city", "to_city", "depart_time",
                             "arrive_time", "duration_minutes", "price"],
    "weather": ["city", "date", "condition", "temp_high_c", "temp_low_c"],
}


def _sql_value(v):
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(round(v, 2))
    return "'" + str(v).replace("'", "''") + "'"


def to_sql(data, seed):
    header = "-- trip_planning data, generated by generate.py --seed %d. Do not edit by hand."
    lines = [header % seed, SCHEMA.rstrip("\n")]
    for table in ["cities", "hotels", "restaurants", "attractions", "city_transport",
                  "inter_city_transport", "weather"]:
        cols = COLUMNS[table]
        for row in data[table]:
            lines.append("INSERT INTO %s (%s) VALUES (%s);"
                         % (table, ", ".join(cols), ", ".join(_sql_value(row[c]) for c in cols)))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("-o", "--output", default="schema.sql")
    args = ap.parse_args()
    sql = to_sql(generate(args.seed), args.seed)
    with open(args.output, "w", encoding="utf-8", newline="\n") as f:
        f.write(sql)


if __name__ == "__main__":
    main()
