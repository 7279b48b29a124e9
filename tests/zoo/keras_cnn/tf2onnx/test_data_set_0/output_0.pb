
B
Identity:0JP‹l«¾‘ŠQ¿©¬I¿¾j><xF¿ gÝºÞ1^½T¦j?ûàt?xiJ¾(£¾
N¿³”D¿Òwt>C,B¿Ù¼³F’¼¢7g?ð“m?L¿F¾