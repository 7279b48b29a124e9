B
Identity:0J û˜y>ø?>dJ>WN‚>,}€>sÙ}>'1|>‰}‚>