// The words of a customer's question that say nothing about its subject: how it is asked ("how do
// I", "is there a way to", "I would like to"), not what it is about. PostgreSQL's stop-word lists
// drop articles and pronouns but keep these, and in a help centre they match everywhere. They are
// stemmed by each language's configuration before they are taken out of a question's words.

const FILLER: Readonly<Record<string, string>> = {
  english:
    'how what which when where who why can could would should will shall may might must do does did done ' +
    'doing want wanted wants need needs like know tell show let get got make way ways possible please help ' +
    'there here thing things something anything someone anyone one ones just only also still really ' +
    'able use using used go going try trying find out see sure instead many much ' +
    'now right currently moment whole entire all every other another certain some any own long take takes took',
  french:
    'comment quoi quel quelle quels quelles quand où qui pourquoi est-ce peut peux pouvez pourrais pourrait ' +
    'puis voudrais voudrait veux voulez faut faire fait savoir sais sait dire montrer moyen façon possible ' +
    "plaît aide aider chose quelque seulement aussi encore vraiment utiliser trouver voir d'abord " +
    'le la les un une des du de combien chaque a ai avez ' +
    'tout toute tous toutes ce cet cette ces mon ma mes son sa ses notre votre leur ' +
    'maintenant actuellement moment suite certain certaine certains autre autres même ' +
    'sans si vers devant pendant depuis après avant être avoir il ils elle elles on connais connaître ' +
    'temps prend prennent faut-il montre montrez vois voit trouve trouvent',
  german:
    'wie was welche welcher welches wann wo wer warum kann kannst können könnte würde sollte muss möchte ' +
    'möchten will wollen brauche brauchen machen mache wissen weiß zeigen zeig lassen gibt geht möglich ' +
    'bitte hilfe helfen etwas jemand nur auch noch wirklich benutzen verwenden finden sehen viel viele vielen ' +
    'braucht gibt ganz ganze ganzen alle allen allem alles darin gerade jetzt moment momentan derzeit ' +
    'mein meine meinen meinem meiner dein deine sein seine unser unsere bestimmt bestimmte bestimmtes ' +
    'andere anderen anderer anderes befindet lange dauert dauern zeige zeigt finde findet sehe sieht',
  spanish:
    'cómo como qué cuál cuáles cuándo dónde quién por puedo puede pueden podría quiero quisiera querría ' +
    'necesito hacer hago saber sé decir mostrar muéstrame manera forma posible favor ayuda ayudar algo ' +
    'alguien solo también todavía realmente usar utilizar encontrar ver cuánto cuánta cuántos cuántas cada vez ' +
    'todo toda todos todas este esta estos estas ese esa esos esas mi mis tu tus su sus nuestro ' +
    'ahora momento actualmente cierto cierta ciertos otro otra otros otras mismo misma tiempo tarda tardan ' +
    'muestro muestra muestre veo vea encuentro encuentra',
};

/** The filler words of the language of a text-search configuration, as one text to stem ('' if none). */
export const fillerWords = (config: string): string => FILLER[config] ?? '';

/** Every configuration's filler words, for SQL that parses a question with each configuration in use. */
export const FILLER_BY_CONFIG: Readonly<Record<string, string>> = FILLER;
