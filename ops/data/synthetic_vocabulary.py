"""Word lists for the synthetic catalogue: titles, overviews and people's names.

Titles and overviews borrow words from the movie's genres, so that text embeddings of a
synthetic movie carry its genre the way a real overview does (a horror overview talks of
night and blood, a western of sheriffs and dust).  Everything here is plain data; the
generator in `ops/data/synthetic.py` picks from it with its own seeded random streams.
"""

from __future__ import annotations

# Per ML-1M genre: title adjectives, title nouns, and overview hooks (what the story is
# about), each a phrase that completes "<protagonist> ...".
GENRE_WORDS: dict[str, dict[str, tuple[str, ...]]] = {
    "Action": {
        "adjectives": ("Deadly", "Maximum", "Final", "Hard", "Lethal", "Rogue", "Iron", "Total"),
        "nouns": ("Impact", "Strike", "Force", "Target", "Fury", "Velocity", "Showdown", "Bullet"),
        "hooks": (
            "must stop a ruthless gang of mercenaries before the city's bridges are blown apart",
            "fights a way out of a hijacked train full of hostages and armed men",
            "takes on a corrupt arms dealer in a race of car chases and explosions",
            "is framed for a heist and has one night to clear a name with fists and guns",
        ),
    },
    "Adventure": {
        "adjectives": ("Lost", "Hidden", "Wild", "Golden", "Distant", "Forgotten", "Great", "Emerald"),
        "nouns": ("Treasure", "Expedition", "Island", "Quest", "Jungle", "Voyage", "Temple", "Horizon"),
        "hooks": (
            "sets out on an expedition across uncharted jungle to find a lost temple",
            "sails to a forgotten island in search of a legendary treasure",
            "leads a daring journey over mountains and deserts with a stolen map",
            "joins a band of explorers racing rivals to an ancient city",
        ),
    },
    "Animation": {
        "adjectives": ("Magic", "Little", "Brave", "Tiny", "Painted", "Dancing", "Merry", "Clever"),
        "nouns": ("Toys", "Kingdom", "Bunny", "Dragon", "Balloon", "Penguin", "Robot", "Forest"),
        "hooks": (
            "is an animated toy who comes to life and helps friends find the way home",
            "is a talking animal who dreams of seeing the world beyond the animated forest",
            "leads a colourful cartoon crew on a journey through a painted kingdom",
            "is a brave little robot in a hand-drawn world of songs and magic",
        ),
    },
    "Children's": {
        "adjectives": ("Happy", "Little", "Lucky", "Sunny", "Silly", "Friendly", "Magic", "Giant"),
        "nouns": ("Puppy", "Pony", "Kids", "Treehouse", "Summer", "Friends", "Holiday", "Adventure"),
        "hooks": (
            "is a curious child who befriends a lost puppy and learns about family",
            "helps a group of kids save their school's summer fair",
            "finds a magic friend in the attic and goes on a gentle family adventure",
            "is a young girl who must return a runaway pony before the holidays",
        ),
    },
    "Comedy": {
        "adjectives": ("Crazy", "Funny", "Dumb", "Wild", "Big", "Awkward", "Nutty", "Happy"),
        "nouns": ("Weekend", "Wedding", "Roommates", "Vacation", "Business", "Neighbors", "Party", "Blunder"),
        "hooks": (
            "stumbles through a week of hilarious misunderstandings at a disastrous wedding",
            "pretends to be a millionaire for a weekend with hilarious results",
            "trades places with an annoying neighbor in a madcap comedy of errors",
            "must survive a family vacation where every plan goes comically wrong",
        ),
    },
    "Crime": {
        "adjectives": ("Dirty", "Cold", "Hard", "Blind", "Loaded", "Crooked", "Silent", "Cheap"),
        "nouns": ("Money", "Heist", "Streets", "Mob", "Score", "Badge", "Racket", "Alibi"),
        "hooks": (
            "plans one last heist with a crew of thieves while the police close in",
            "is a detective who goes undercover inside the mob that killed a partner",
            "gets caught between two crime families fighting over a stolen fortune",
            "is a small-time crook pulled into a murder by a crooked cop",
        ),
    },
    "Documentary": {
        "adjectives": ("True", "Real", "Inside", "American", "Hidden", "Living", "Untold", "Open"),
        "nouns": ("Story", "Voices", "Life", "Record", "Portrait", "Journey", "Witness", "Archive"),
        "hooks": (
            "is followed by the camera in this documentary about real lives in a mining town",
            "tells, in interviews and archive footage, the true story of a forgotten musician",
            "is the subject of a documentary portrait of a community facing change",
            "guides the documentary through the history of a famous trial",
        ),
    },
    "Drama": {
        "adjectives": ("Quiet", "Broken", "Long", "Second", "Simple", "Bitter", "Tender", "Silent"),
        "nouns": ("Years", "Promise", "Season", "Letters", "River", "Home", "Grace", "Secrets"),
        "hooks": (
            "returns home to care for a dying father and faces the family's buried secrets",
            "struggles to hold a family together through a long hard winter",
            "is a teacher whose life changes after one student's tragedy",
            "must choose between ambition and the people left behind",
        ),
    },
    "Fantasy": {
        "adjectives": ("Enchanted", "Dark", "Eternal", "Crystal", "Mystic", "Seventh", "Silver", "Ancient"),
        "nouns": ("Sword", "Wizard", "Realm", "Spell", "Crown", "Unicorn", "Prophecy", "Kingdom"),
        "hooks": (
            "is chosen by a prophecy to carry a magic sword through an enchanted realm",
            "must break a wizard's spell before the kingdom falls into darkness",
            "discovers a door to a mystic world of dragons and sorcery",
            "is an apprentice wizard who steals a crown of ancient magic",
        ),
    },
    "Film-Noir": {
        "adjectives": ("Naked", "Lonely", "Dark", "Double", "Midnight", "Fallen", "Crooked", "Scarlet"),
        "nouns": ("City", "Dame", "Alley", "Shadow", "Rain", "Smoke", "Deal", "Passage"),
        "hooks": (
            "is a private eye seduced by a femme fatale into a web of murder in the rain-soaked city",
            "is a weary detective who follows a double-cross through smoky nightclubs",
            "is an insurance man drawn by a scheming woman into a cold-blooded killing",
            "wakes in a shadowy city with no memory and a dead man's wallet",
        ),
    },
    "Horror": {
        "adjectives": ("Bloody", "Evil", "Dead", "Haunted", "Cursed", "Dark", "Howling", "Final"),
        "nouns": ("Night", "Blood", "Graveyard", "Scream", "Curse", "Nightmare", "Creature", "Demon"),
        "hooks": (
            "spends a terrifying night in a haunted house where an ancient evil awakens",
            "is stalked by a masked killer at a lonely summer camp",
            "opens a cursed grave and unleashes a demon that feeds on fear",
            "is trapped in a small town overrun by bloodthirsty creatures",
        ),
    },
    "Musical": {
        "adjectives": ("Singing", "Dancing", "Broadway", "Golden", "Jazz", "Swinging", "Sweet", "Starlit"),
        "nouns": ("Melody", "Song", "Rhythm", "Stage", "Ballroom", "Serenade", "Chorus", "Music"),
        "hooks": (
            "sings and dances a way from the chorus line to the Broadway stage",
            "falls in love to a jazz melody in a musical of songs and dance numbers",
            "puts on a show with a troupe of singers to save an old theater",
            "is a songwriter whose music brings a small town to its feet",
        ),
    },
    "Mystery": {
        "adjectives": ("Missing", "Secret", "Vanishing", "Unseen", "Strange", "Locked", "Hidden", "Thirteenth"),
        "nouns": ("Clue", "Witness", "Key", "Puzzle", "Stranger", "Room", "Letter", "Enigma"),
        "hooks": (
            "investigates the mysterious disappearance of a guest from a locked room",
            "follows a trail of clues left by a stranger who knows too much",
            "must solve a puzzle of coded letters before the next victim is found",
            "is an amateur sleuth unravelling the secret of a missing heiress",
        ),
    },
    "Romance": {
        "adjectives": ("Sweet", "Endless", "Sleepless", "Summer", "Tender", "Forever", "First", "Secret"),
        "nouns": ("Love", "Heart", "Kiss", "Affair", "Promise", "Valentine", "Romance", "Sweetheart"),
        "hooks": (
            "falls in love with a stranger during one unforgettable summer",
            "must choose between two suitors in a love story across two cities",
            "writes letters to a secret admirer and finds romance where least expected",
            "rekindles a first love on the eve of a wedding to someone else",
        ),
    },
    "Sci-Fi": {
        "adjectives": ("Alien", "Cosmic", "Quantum", "Galactic", "Cyber", "Orbital", "Synthetic", "Infinite"),
        "nouns": ("Planet", "Galaxy", "Android", "Star", "Colony", "Signal", "Frontier", "Machine"),
        "hooks": (
            "leads a starship crew to answer an alien signal from a distant galaxy",
            "is an android who questions its programming aboard a space colony",
            "travels through time to stop a machine uprising that will end humanity",
            "discovers that the planet's colony is controlled by an alien intelligence",
        ),
    },
    "Thriller": {
        "adjectives": ("Fatal", "Deadly", "Silent", "Hidden", "Breaking", "Dangerous", "Final", "Sudden"),
        "nouns": ("Conspiracy", "Witness", "Pursuit", "Edge", "Trap", "Game", "Countdown", "Obsession"),
        "hooks": (
            "uncovers a government conspiracy and becomes the target of a relentless killer",
            "is stalked by an obsessive stranger in a tense game of cat and mouse",
            "has hours to find a bomb before the countdown reaches zero",
            "witnesses a murder and is pursued by assassins across the city",
        ),
    },
    "War": {
        "adjectives": ("Last", "Longest", "Bloody", "Brave", "Iron", "Forgotten", "Thin", "Burning"),
        "nouns": ("Battalion", "Battle", "Platoon", "Front", "Ridge", "Soldiers", "Beach", "Siege"),
        "hooks": (
            "leads a platoon of soldiers behind enemy lines in the last days of the war",
            "survives the battle for a ridge as the front collapses around the battalion",
            "is a young soldier who learns the cost of war on a burning beach",
            "commands a besieged garrison through a bitter winter siege",
        ),
    },
    "Western": {
        "adjectives": ("Dusty", "Lonesome", "Wild", "Tall", "High", "Rio", "Magnificent", "Outlaw"),
        "nouns": ("Trail", "Sheriff", "Saddle", "Canyon", "Gunfighter", "Frontier", "Ranch", "Stagecoach"),
        "hooks": (
            "is a lone gunfighter who rides into a dusty frontier town ruled by outlaws",
            "is a sheriff facing a gang of cattle rustlers at high noon",
            "drives a herd along the trail through canyon country and hostile land",
            "guards a stagecoach of settlers across the wild frontier",
        ),
    },
}

# Words that suit any genre, mixed into titles so that not every title gives its genre away.
COMMON_ADJECTIVES = ("Last", "Other", "Second", "Long", "Red", "Blue", "Big", "Little", "Lost", "American", "Perfect", "Wrong")
COMMON_NOUNS = ("Harbor", "Road", "Summer", "Man", "Woman", "Door", "Game", "Heart", "Line", "Island", "Night", "Sky")
PLACES = ("Paris", "Texas", "Chicago", "Brooklyn", "Tokyo", "Rome", "Alaska", "Hollywood", "Memphis", "Berlin", "Manhattan", "Montana")
# MovieLens moves these to the end of the title: "Last Harbor, The (1987)".
ARTICLES = ("The", "A", "An")
SEQUEL_MARKS = ("II", "2", "3", "Part II")

PROTAGONISTS = (
    "A retired cop", "A young widow", "Two estranged brothers", "A small-town teacher", "A reluctant hero",
    "An ambitious journalist", "A lonely teenager", "A former soldier", "A struggling musician", "A brilliant scientist",
    "A single mother", "A ship's captain", "A shy librarian", "A street-smart kid", "An aging boxer",
)
SETTINGS = (
    "In a sleepy coastal town", "In 1950s Los Angeles", "On the eve of the new year", "In a city that never sleeps",
    "Far from home", "During one long summer", "In the heart of the desert", "On a remote island",
    "In a crumbling mansion", "Across the American heartland",
)
CLOSERS = (
    "Nothing will ever be the same.", "Some secrets are better left buried.", "The clock is ticking.",
    "It is a journey neither will forget.", "Based on a celebrated novel.", "Friendship is put to the test.",
    "Only the bravest will make it home.", "Trust no one.",
)

FIRST_NAMES = (
    "James", "Mary", "John", "Patricia", "Robert", "Linda", "Michael", "Barbara", "William", "Elizabeth",
    "David", "Susan", "Richard", "Jessica", "Joseph", "Sarah", "Thomas", "Karen", "Charles", "Nancy",
    "Daniel", "Lisa", "Matthew", "Margaret", "Anthony", "Sandra", "Mark", "Ashley", "Paul", "Emily",
    "Steven", "Donna", "Andrew", "Michelle", "Kenneth", "Carol", "George", "Amanda", "Edward", "Melissa",
    "Brian", "Deborah", "Ronald", "Stephanie", "Kevin", "Rebecca", "Jason", "Laura", "Gary", "Helen",
    "Frank", "Diane", "Peter", "Julia", "Walter", "Grace", "Henry", "Rose", "Victor", "Claire",
)
LAST_NAMES = (
    "Smith", "Johnson", "Williams", "Brown", "Jones", "Miller", "Davis", "Wilson", "Anderson", "Taylor",
    "Thomas", "Moore", "Martin", "Jackson", "Thompson", "White", "Harris", "Clark", "Lewis", "Robinson",
    "Walker", "Young", "Allen", "King", "Wright", "Scott", "Hill", "Green", "Adams", "Baker",
    "Nelson", "Carter", "Mitchell", "Roberts", "Turner", "Phillips", "Campbell", "Parker", "Evans", "Edwards",
    "Collins", "Stewart", "Morris", "Rogers", "Reed", "Cook", "Morgan", "Bell", "Murphy", "Bailey",
    "Cooper", "Richardson", "Cox", "Howard", "Ward", "Peterson", "Gray", "Hughes", "Price", "Sanders",
    "Bennett", "Wood", "Barnes", "Ross", "Henderson", "Coleman", "Jenkins", "Perry", "Powell", "Long",
    "Fischer", "Moreau", "Rossi", "Tanaka", "Larsen", "Novak", "Keller", "Romano", "Dubois", "Weber",
)
